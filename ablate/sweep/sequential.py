"""Seeds added until every row is decided: a sweep's sequential design (``decide: {max_seeds: N}``) run by its pool.

At each look the queue judges every contrast of the family (:mod:`ablate.stats.factorial`: each row against the
base row of its stratum, a two-factor design's effects and interactions) on the seeds its cells have ended, with
the report's own code (the same boundaries and verdicts): a contrast still undecided with fewer than ``max_seeds``
gets its next seed in every one of its cells (a row and its stratum's base; the four cells of an interaction), so
pairs stay pairs (same seed = same data order and initial weights). A contrast is judged only on complete looks
(the first n seeds of each of its cells ended), so it waits while a cell catches up; once decided it asks for no
seed more. A ladder's trends ask for none: they are judged at the seeds the rest reached. A relaunch replays the
looks from the runs that ended and trains only what is missing: a decided sweep trains nothing.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

from ablate.runs.outcome import outcomes, read_run
from ablate.stats.factorial import judge
from ablate.stats.design import Design
from ablate.sweep.plan import Planner, PlannedRun, factor_record, factorial_of
from ablate.sweep.queue import Look, RunQueue
from ablate.sweep.spec import Point, Sweep


class SequentialQueue(RunQueue):
    """The plan's runs, then a seed more for each row still undecided at its last complete look."""

    def __init__(self, sweep: Sweep, sweep_dir: Path, planner: Planner, runs: list[PlannedRun],
                 todo: list[PlannedRun], design: Design, save: Callable[[list[PlannedRun]], None],
                 pending: Callable[[list[PlannedRun]], list[PlannedRun]]):
        super().__init__(sweep, sweep_dir, runs, todo)
        self.planner, self.design, self.save, self.pending = planner, design, save, pending
        self.contrasts = [c for c in factorial_of(runs, factor_record(sweep)).family() if c.drives]
        self.points: dict[str, Point] = {}
        for point in sweep.points():
            self.points.setdefault(point.variant, point)
        self.in_flight = 0
        self.decided = 0  # contrasts decided at their last complete look
        self.look_runs = {r.id for r in todo}  # the runs of the current look (the first look's: the plan's to do)
        self.advance()

    def look(self) -> Look:
        """Where the design stands: its look (the most seeds a variant has), its runs and its decided contrasts."""
        variants = {r.variant for r in self.runs}
        seeds = max((sum(r.variant == v for r in self.runs) for v in variants), default=0)
        return Look(seeds, len(self.runs), len(variants) * self.design.max_seeds, self.decided, len(self.contrasts),
                    frozenset(self.look_runs))

    def next(self) -> PlannedRun | None:
        run = super().next()
        self.in_flight += run is not None
        return run

    def take(self, same: Callable[[PlannedRun], bool], most: int) -> list[PlannedRun]:
        taken = super().take(same, most)  # a seed array's other members: in flight as much as ``next``'s run
        self.in_flight += len(taken)
        return taken

    def settled(self, run: PlannedRun) -> None:
        super().settled(run)
        self.in_flight -= 1
        if not self.todo and not self.in_flight:
            self.advance()

    def advance(self) -> None:
        """Add the seeds the looks ask for, until some run is left to train or every row is done."""
        while not self.closed and (added := self.extend()):
            todo = self.pending(added)
            if todo:
                self.todo.extend(todo)
                self.look_runs = {r.id for r in todo}
                return

    def looks(self) -> dict[str, set[int]]:
        """The seeds each cell must add: the next seed of every cell of a contrast whose last complete look left
        some judged metric of it undecided, with seeds to spare. A contrast counts as decided once every judged
        metric is (each at its own first deciding look, as the report reads it)."""
        rows = [read_run(self.sweep_dir, asdict(r), self.sweep.metric["name"]) for r in self.runs]
        variants = list(dict.fromkeys(r.variant for r in rows))
        ended = {j.name: {v: outcomes([r for r in rows if r.variant == v], j.name) for v in variants}
                 for j in self.sweep.judged}
        planned = {v: sum(r.variant == v for r in self.runs) for v in variants}
        needs: dict[str, set[int]] = {}
        self.decided = 0
        for contrast in self.contrasts:
            n = min(planned.get(v, 0) for v in contrast.cells)
            open_at_n, decided = False, True
            for j in self.sweep.judged:
                if not all(ended[j.name].get(v) for v in contrast.cells):
                    open_at_n, decided = False, False
                    break  # a metric not yet measured on some cell (test/bleu before its evaluation): wait
                c = judge(contrast, ended[j.name], self.design.judging(j), j.goal)
                decided &= c.decided_at is not None
                open_at_n |= c.decided_at is None and c.look == n
            self.decided += decided
            if n < self.design.max_seeds and open_at_n:
                for variant in contrast.cells:
                    needs.setdefault(variant, set()).add(self.design.seeds(n + 1)[-1])
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
