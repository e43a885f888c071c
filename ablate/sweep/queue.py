"""What a sweep's pool runs next: the plan's pending runs in order (grid, random), or the points a Bayesian
search proposes as runs finish (bayes). Both stop handing out runs once a run reaches ``metric.target``.

A bayes sweep's plan grows: each proposed point is planned (validated) when it is asked for, and written
to plan.json with its quantiles (``search``), so a relaunch restores what the search already learned.
"""

from __future__ import annotations

import statistics
from collections import deque
from pathlib import Path
from typing import Callable

from ablate.runs.files import read_result
from ablate.sweep.plan import Planner, PlannedRun
from ablate.sweep.spec import Sweep

SETTLED = ("finished", "failed", "stopped")


def final_value(sweep_dir: Path, run: PlannedRun, metric: str) -> float | None:
    """A settled run's final value of the sweep's metric (its best when the final is missing)."""
    result = read_result(sweep_dir / run.run_dir) or {}
    if result.get("status") != "finished":
        return None
    for part in (result.get("final") or {}, result.get("best") or {}, result):
        if isinstance(part.get(metric), (int, float)):
            return float(part[metric])
    return None


class RunQueue:
    """The plan's runs still to do, handed out in plan order."""

    def __init__(self, sweep: Sweep, sweep_dir: Path, runs: list[PlannedRun], todo: list[PlannedRun]):
        self.sweep, self.sweep_dir = sweep, sweep_dir
        self.runs, self.todo = runs, deque(todo)
        self.closed: str | None = None  # why no new run starts (the target was reached)

    @property
    def total(self) -> int:
        return len(self.runs)

    def next(self) -> PlannedRun | None:
        """The next run to start, or None when there is none (for now)."""
        return None if self.closed or not self.todo else self.todo.popleft()

    def settled(self, run: PlannedRun) -> None:
        """A run has ended (finished, failed, stopped): close the queue once one reaches the metric's target."""
        value = final_value(self.sweep_dir, run, self.sweep.metric["name"])
        if self.closed is None and self.sweep.reached(value):
            self.closed = f"{run.id} ({run.variant}) reached metric.target: {self.sweep.metric['name']} = {value:.6g}"


class BayesQueue(RunQueue):
    """Points proposed by :class:`ablate.sweep.bayes.BayesSearch`, each run once per seed, ``run_cap`` runs in all."""

    def __init__(self, sweep: Sweep, sweep_dir: Path, planner: Planner, runs: list[PlannedRun],
                 save: Callable[[list[PlannedRun]], None], is_done: Callable[[PlannedRun], bool]):
        from ablate.sweep.bayes import BayesSearch

        super().__init__(sweep, sweep_dir, runs, [])
        self.search, self.planner, self.save = BayesSearch(sweep), planner, save
        self.points: dict[int, list[PlannedRun]] = {}  # trial number -> its runs (one per seed), awaiting scores
        self.restored: dict[int, list[PlannedRun]] = {}  # points of an earlier launch still running
        for trial, group in _by_trial(runs).items():  # a relaunch: tell the search what earlier runs scored
            if all(is_done(r) for r in group):
                self.search.remember(group[0].search["u"], self._score(group))
            else:
                self.restored[trial] = group
                self.todo.extend(r for r in group if not is_done(r))
        self.asked = len(_by_trial(runs))

    @property
    def total(self) -> int:
        return self.sweep.n_samples() * len(self.sweep.seeds)

    def next(self) -> PlannedRun | None:
        if self.closed:
            return None
        if not self.todo and self.asked < self.sweep.n_samples():
            number, u = self.search.ask()
            self.asked += 1
            group = self.planner.plan([self.search.point(u, seed) for seed in self.sweep.seeds])
            for run in group:
                run.search = {"trial": number, "u": u}
            self.points[number] = group
            self.runs.extend(group)
            self.save(self.runs)
            self.todo.extend(group)
        return self.todo.popleft() if self.todo else None

    def settled(self, run: PlannedRun) -> None:
        super().settled(run)
        number = (run.search or {}).get("trial")
        group = self.points.get(number) or self.restored.get(number)
        if group is None or not all((read_result(self.sweep_dir / r.run_dir) or {}).get("status") in SETTLED
                                    for r in group):
            return
        if number in self.points:
            self.search.tell(number, self._score(self.points.pop(number)))
        else:
            self.search.remember(group[0].search["u"], self._score(self.restored.pop(number)))

    def _score(self, group: list[PlannedRun]) -> float | None:
        values = [v for r in group if (v := final_value(self.sweep_dir, r, self.sweep.metric["name"])) is not None]
        return statistics.fmean(values) if values else None


def _by_trial(runs: list[PlannedRun]) -> dict[int, list[PlannedRun]]:
    groups: dict[int, list[PlannedRun]] = {}
    for run in runs:
        if run.search is not None:
            groups.setdefault(run.search["trial"], []).append(run)
    return groups
