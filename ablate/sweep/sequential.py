"""Seeds added until every row is decided: a sweep's sequential design (``decide: {max_seeds: N}``) run by its pool.

At each look the queue judges every row on the seeds it and the base have ended, with the report's own code
(:func:`ablate.stats.compare.compare`, the same boundaries and verdicts): a row still undecided with fewer than
``max_seeds`` gets its next seed, and the base every seed a row asks for, so pairs stay pairs (same seed = same
data order and initial weights). A row is judged only on complete looks (its first n seeds and the base's ended),
so it waits while the base catches up; once decided it gets no seed more. A relaunch replays the looks from the
runs that ended and trains only what is missing: a decided sweep trains nothing.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

from ablate.report.collect import outcomes, read_run
from ablate.stats.compare import compare
from ablate.stats.design import Design
from ablate.sweep.plan import Planner, PlannedRun, base_variant
from ablate.sweep.queue import RunQueue
from ablate.sweep.spec import Point, Sweep


def family(runs: list[PlannedRun]) -> list[str]:
    """The variants compared with the base, in plan order: every variant but the base whose mask leaks no labels."""
    base = base_variant(runs)
    return list(dict.fromkeys(r.variant for r in runs if r.variant != base and not r.leaks_labels))


class SequentialQueue(RunQueue):
    """The plan's runs, then a seed more for each row still undecided at its last complete look."""

    def __init__(self, sweep: Sweep, sweep_dir: Path, planner: Planner, runs: list[PlannedRun],
                 todo: list[PlannedRun], design: Design, save: Callable[[list[PlannedRun]], None],
                 pending: Callable[[list[PlannedRun]], list[PlannedRun]]):
        super().__init__(sweep, sweep_dir, runs, todo)
        self.planner, self.design, self.save, self.pending = planner, design, save, pending
        self.base = base_variant(runs)
        self.points: dict[str, Point] = {}
        for point in sweep.points():
            self.points.setdefault(point.variant, point)
        self.in_flight = 0
        self.advance()

    def next(self) -> PlannedRun | None:
        run = super().next()
        self.in_flight += run is not None
        return run

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
                return

    def looks(self) -> dict[str, int]:
        """The next seed of each row whose last complete look left it undecided with seeds to spare."""
        metric, goal = self.sweep.metric["name"], self.sweep.metric["goal"]  # as the report reads them
        rows = [read_run(self.sweep_dir, asdict(r), metric) for r in self.runs]
        ended = {v: outcomes([r for r in rows if r.variant == v], metric) for v in dict.fromkeys(r.variant for r in rows)}
        needs = {}
        for variant in family(self.runs):
            n = sum(r.variant == variant for r in self.runs)
            if n >= self.design.max_seeds or not ended.get(self.base):
                continue
            c = compare(ended.get(variant, {}), ended[self.base], self.design, goal)
            if c.decided_at is None and c.look == n:
                needs[variant] = self.design.seeds(n + 1)[-1]
        return needs

    def extend(self) -> list[PlannedRun]:
        """Plan (and save) the runs of the next look; [] when no row needs a seed."""
        needs = self.looks()
        have = {r.seed for r in self.runs if r.variant == self.base}
        points = [replace(self.points[v], seed=s) for v, s in needs.items()]
        points += [replace(self.points[self.base], seed=s) for s in sorted(set(needs.values()) - have)]
        added = self.planner.plan(points) if points else []
        if added:
            self.runs.extend(added)
            self.save(self.runs)
        return added
