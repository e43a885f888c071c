"""Seeds added until every row is decided: a sweep's sequential design (``decide: {max_seeds: N}``) run by its pool.

At each look the queue judges every contrast of the family (:mod:`ablate.stats.factorial`: each row against the
base row of its stratum, a two-factor design's effects and interactions) on the seeds its cells have ended, with
the report's own code (the same boundaries and verdicts): a contrast still undecided with fewer than ``max_seeds``
gets its next seed in every one of its cells (a row and its stratum's base; the four cells of an interaction), so
pairs stay pairs (same seed = same data order and initial weights). A contrast is judged only on complete looks
(the first n seeds of each of its cells ended), so it waits while a cell catches up; once decided it asks for no
seed more. A ladder's trends ask for none: they are judged at the seeds the rest reached. With several judged
metrics (``decide.metrics``) each is judged with its own goal and margin, and a contrast stays open while any of them
is undecided at its last complete look (a metric that ``ablate evaluate`` writes is an outcome once its run's job,
training then evaluation, has ended).

A look is no barrier. The queue judges as each run settles, so a contrast's next seeds are asked for as soon as its
own look is complete, and a worker that would idle (every run asked for has started, some are still running) starts
a seed ahead (:meth:`SequentialQueue.speculate`): the seed after the look under way of each contrast undecided at its
last complete look, in every cell of it, the cells most such contrasts share first (a stratum's base), then the
lower seed. The verdicts stay exact: a contrast's verdict at look n is taken from the first n seeds of its cells
(:func:`ablate.stats.judge.judge_paired` reads ``x[:, :n]`` and reports the first deciding look), so a seed started
ahead that ends after its row was decided never changes the verdict, nor which seeds the looks ask for; it is a run
the design did not need, which finishes (a running run is never stopped) and shows in the report as a run beyond
its row's deciding look. ``ABLATE_SPECULATE=0`` keeps the barrier: a look's seeds are planned once every run before
them has ended, and no seed starts ahead.

A relaunch replays the looks from the runs that ended and trains only what is missing: a decided sweep trains
nothing. Runs an earlier launch started ahead stay in the plan when they ended (outcomes like any other); one cut
short is planned again only when a look or an idle worker asks for it (same seed, same run: it resumes from its
checkpoint), so a relaunch never finishes a run its rows no longer need.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, replace
from itertools import takewhile
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ablate.runs.outcome import outcomes, read_run
from ablate.stats.factorial import judge
from ablate.stats.design import Design
from ablate.sweep.plan import Planner, PlannedRun, factor_record, factorial_of
from ablate.sweep.queue import Look, RunQueue
from ablate.sweep.spec import Point, Sweep


def speculating() -> bool:
    """Whether idle workers start seeds ahead of the looks (``ABLATE_SPECULATE=0``: no, the looks are barriers)."""
    return os.environ.get("ABLATE_SPECULATE", "1") != "0"


class SequentialQueue(RunQueue):
    """The plan's runs, then a seed more for each row still undecided at its last complete look, and seeds ahead for
    the workers that would idle."""

    def __init__(self, sweep: Sweep, sweep_dir: Path, planner: Planner, runs: list[PlannedRun],
                 todo: list[PlannedRun], design: Design, save: Callable[[list[PlannedRun]], None],
                 pending: Callable[[list[PlannedRun]], list[PlannedRun]], *, earlier: list[PlannedRun],
                 speculate: bool | None = None):
        super().__init__(sweep, sweep_dir, runs, todo)
        self.planner, self.design, self.save, self.pending = planner, design, save, pending
        self.speculative = speculating() if speculate is None else speculate
        self.contrasts = [c for c in factorial_of(runs, factor_record(sweep)).family() if c.drives]
        self.points: dict[str, Point] = {}
        for point in sweep.points():
            self.points.setdefault(point.variant, point)
        self.running: set[str] = set()  # the ids of the runs handed out and not yet settled
        self.decided = 0  # contrasts decided at their last complete look
        self.ahead: list[tuple[str, int]] = []  # (variant, seed) a worker that would idle starts, the first first
        self.look_runs = {r.id for r in todo}  # the runs of the current look (the first look's: the plan's to do)
        self.keep_ended(earlier)  # the runs an earlier launch planned, read before anything saved the plan over them
        self.advance()

    def look(self) -> Look:
        """Where the design stands: its look (the most seeds a variant has), its runs and its decided contrasts."""
        variants = {r.variant for r in self.runs}
        seeds = max((sum(r.variant == v for r in self.runs) for v in variants), default=0)
        return Look(seeds, len(self.runs), len(variants) * self.design.max_seeds, self.decided, len(self.contrasts),
                    frozenset(self.look_runs))

    def next(self) -> PlannedRun | None:
        run = super().next()
        if run is None and self.speculative and self.running:  # a worker would idle while runs are in flight
            run = self.speculate()
        if run is not None:
            self.running.add(run.id)
        return run

    def take(self, same: Callable[[PlannedRun], bool], most: int) -> list[PlannedRun]:
        taken = super().take(same, most)  # a seed array's other members: in flight as much as ``next``'s run
        self.running.update(r.id for r in taken)
        return taken

    def settled(self, run: PlannedRun) -> None:
        super().settled(run)
        self.running.discard(run.id)
        if self.speculative or not (self.todo or self.running):  # judged as runs settle, or at the barrier
            self.advance()

    def advance(self) -> None:
        """Add the seeds the complete looks ask for, until some run is left to train or no look asks for more."""
        while not self.closed and (added := self.extend()):
            todo = self.pending(added)
            if todo:
                self.todo.extend(todo)
                self.look_runs = {r.id for r in todo} | self.running
                return

    def speculate(self) -> PlannedRun | None:
        """A seed ahead for a worker that would idle (see the module docstring); None when no look may need one."""
        have = {(r.variant, r.seed) for r in self.runs}
        for variant, seed in self.ahead:
            if self.closed:
                return None
            if (variant, seed) in have:
                continue
            added = self.planner.plan([replace(self.points[variant], seed=seed)])
            self.runs.extend(added)
            self.save(self.runs)
            self.look_runs |= {r.id for r in added}
            if todo := self.pending(added):  # a run an earlier launch cut short: it resumes
                return todo[0]
        return None

    def looks(self) -> dict[str, set[int]]:
        """The seeds each cell must add: the next seed of every cell of a contrast whose last complete look left
        some judged metric of it undecided, with seeds to spare. A contrast counts as decided once every judged
        metric is (each at its own first deciding look, as the report reads it). Also sets :attr:`ahead`: the seed
        after the look under way of the contrasts whose next look is incomplete, the cells most of them share
        first."""
        rows = [read_run(self.sweep_dir, asdict(r), self.sweep.metric["name"]) for r in self.runs]
        variants = list(dict.fromkeys(r.variant for r in rows))
        ended = {j.name: {v: outcomes([r for r in rows if r.variant == v], j.name) for v in variants}
                 for j in self.sweep.judged}
        planned = {v: sum(r.variant == v for r in self.runs) for v in variants}
        needs: dict[str, set[int]] = {}
        ahead: Counter[tuple[str, int]] = Counter()
        self.decided = 0
        for contrast in self.contrasts:
            n = min(planned.get(v, 0) for v in contrast.cells)
            first = max(1, len(self.design.first))
            if any(complete_look(contrast.cells, ended[j.name], self.design) < first for j in self.sweep.judged):
                continue  # a first look not complete on some metric: judged on fewer seeds, it could decide too early
            judged = [judge(contrast, ended[j.name], self.design.judging(j), j.goal) for j in self.sweep.judged]
            open_looks = {c.look for c in judged if c.decided_at is None}  # the metrics still undecided
            self.decided += not open_looks
            if n < self.design.max_seeds and open_looks & {n, n - 1}:
                for variant in contrast.cells:  # look n - 1 alone: its look n is under way, n + 1 is ahead of it
                    if n in open_looks:
                        needs.setdefault(variant, set()).add(self.design.seeds(n + 1)[-1])
                    else:
                        ahead[variant, self.design.seeds(n + 1)[-1]] += 1
        order = {v: i for i, v in enumerate(self.points)}
        self.ahead = sorted(ahead, key=lambda vs: (-ahead[vs], vs[1], order[vs[0]]))
        return needs

    def extend(self) -> list[PlannedRun]:
        """Plan (and save) the runs of the next look; [] when no contrast needs a seed."""
        have = {(r.variant, r.seed) for r in self.runs}
        points = [replace(self.points[v], seed=s) for v, seeds in self.looks().items() for s in sorted(seeds)
                  if (v, s) not in have]
        added = self.planner.plan(points) if points else []
        if added:
            self.runs.extend(added)
            self.save(self.runs)
        return added

    def keep_ended(self, earlier: list[PlannedRun]) -> None:
        """Keep the runs an earlier launch planned beyond this plan (seeds its looks added, seeds started ahead) that
        have ended: they are outcomes. One that has not is left out, to be planned again when a look asks for it."""
        known, first = {r.id for r in self.runs}, set(self.design.seeds(self.design.max_seeds))
        extra = [r for r in earlier if r.id not in known and r.variant in self.points and r.seed in first]
        to_do = {r.id for r in self.pending(extra)} if extra else set()
        ended = {r.id for r in extra if r.id not in to_do}
        points = [replace(self.points[r.variant], seed=r.seed) for r in extra if r.id in ended]
        self.runs.extend(r for r in (self.planner.plan(points) if points else []) if r.id in ended)


def complete_look(cells: Sequence[str], ended: Mapping[str, Mapping[int, float]], design: Design) -> int:
    """How many of the design's seeds, from the first, every one of ``cells`` has ended: the contrast's last complete
    look (``ended``: each cell's outcomes by seed)."""
    return sum(1 for _ in takewhile(lambda s: all(s in ended.get(v, {}) for v in cells),
                                    design.seeds(design.max_seeds)))
