"""What a sweep's pool runs next: the plan's pending runs in order (grid, random), or the points a Bayesian
search proposes as runs finish (bayes). Both stop handing out runs once a run reaches ``metric.target``.

A bayes sweep's plan grows: each proposed point is planned (validated) when it is asked for, and written
to plan.json with its quantiles (``search``), so a relaunch restores what the search already learned.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ablate.runs.files import final_value, read_history, read_result
from ablate.runs.status import SETTLED, Status
from ablate.stats.design import MINIMIZE
from ablate.sweep.plan import Planner, PlannedRun
from ablate.sweep.spec import Sweep


def run_value(sweep_dir: Path, run: PlannedRun, metric: str) -> float | None:
    """A settled run's final value of the sweep's metric (its best when the final is missing)."""
    result = read_result(sweep_dir / run.run_dir) or {}
    if result.get("status") != Status.FINISHED:
        return None
    value = final_value(result, metric)
    if value is None and isinstance(result.get(metric), (int, float)):  # test/bleu: ablate evaluate adds it
        value = float(result[metric])
    return value


@dataclass(frozen=True)
class Look:
    """A sequential design's current look, for the progress line (:mod:`ablate.sweep.progress`)."""

    seeds: int  # the most seeds a variant has planned
    planned: int  # runs planned now
    most: int  # runs at most (every variant at max_seeds)
    decided: int  # contrasts decided at their last complete look
    contrasts: int  # contrasts that drive the design
    runs: frozenset[str]  # the ids of this look's runs


class RunQueue:
    """The plan's runs still to do, handed out in plan order."""

    planned_ahead = True  # its runs are planned before they start (a progress bar can count them)

    def __init__(self, sweep: Sweep, sweep_dir: Path, runs: list[PlannedRun], todo: list[PlannedRun]):
        self.sweep, self.sweep_dir = sweep, sweep_dir
        self.runs, self.todo = runs, deque(todo)
        self.closed: str | None = None  # why no new run starts (the target was reached)

    @property
    def total(self) -> int | None:
        """The runs the sweep will have when the queue is empty (None: open-ended)."""
        return len(self.runs)

    def next(self) -> PlannedRun | None:
        """The next run to start, or None when there is none (for now)."""
        return None if self.closed or not self.todo else self.todo.popleft()

    def take(self, same: Callable[[PlannedRun], bool], most: int) -> list[PlannedRun]:
        """Up to ``most`` of the runs waiting now for which ``same`` holds, taken out of the queue (the other members
        of a seed array: :mod:`ablate.sweep.arrays`)."""
        taken = [] if self.closed else [r for r in self.todo if same(r)][:max(0, most)]
        for run in taken:
            self.todo.remove(run)
        return taken

    def look(self) -> Look | None:
        """A sequential design's current look; None for a plan that does not grow by looks."""
        return None

    def settled(self, run: PlannedRun) -> None:
        """A run has ended (finished, failed, stopped): close the queue once one reaches the metric's target."""
        value = run_value(self.sweep_dir, run, self.sweep.metric["name"])
        if self.closed is None and self.sweep.reached(value):
            self.closed = f"{run.id} ({run.variant}) reached metric.target: {self.sweep.metric['name']} = {value:.6g}"


class StreamQueue(RunQueue):
    """An open-ended random sweep: after the runs of earlier launches, a new draw each time a worker is free,
    planned (validated) and added to plan.json as it is drawn, until a run reaches ``metric.target`` or the
    sweep is stopped (Ctrl-C, SIGTERM: finished runs stay, the rest resume on relaunch, whose stream draws
    the same points again)."""

    planned_ahead = False

    def __init__(self, sweep: Sweep, sweep_dir: Path, runs: list[PlannedRun], todo: list[PlannedRun],
                 stream: Iterator[PlannedRun], save: Callable[[list[PlannedRun]], None]):
        super().__init__(sweep, sweep_dir, runs, todo)
        self.stream, self.save = stream, save

    @property
    def total(self) -> int | None:
        return None

    def next(self) -> PlannedRun | None:
        if self.closed:
            return None
        if self.todo:
            return self.todo.popleft()
        run = next(self.stream)
        self.runs.append(run)
        self.save(self.runs)
        return run


class BayesQueue(RunQueue):
    """Points proposed by :class:`ablate.sweep.bayes.BayesSearch`, each run once per seed, ``run_cap`` runs in all."""

    planned_ahead = False

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
    def total(self) -> int | None:
        n = self.sweep.n_samples()
        return None if n is None else n * len(self.sweep.seeds)

    def next(self) -> PlannedRun | None:
        if self.closed:
            return None
        n = self.sweep.n_samples()
        if not self.todo and (n is None or self.asked < n):
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

    def _score(self, group: list[PlannedRun]) -> float:
        """A point's score: the mean over its seeds of each run's score (:func:`run_score`)."""
        return statistics.fmean(run_score(self.sweep, self.sweep_dir, r, self._ended()) for r in group)

    def _ended(self) -> list[list[float]]:
        """The logged histories of every ended run (what W&B's ``worst`` imputation looks at)."""
        metric = self.sweep.metric["name"]
        return [h for r in self.runs if (read_result(self.sweep_dir / r.run_dir) or {}).get("status") in SETTLED
                and (h := [v for v in read_history(self.sweep_dir / r.run_dir, metric) if math.isfinite(v)])]


def run_score(sweep: Sweep, sweep_dir: Path, run: PlannedRun, ended: list[list[float]]) -> float:
    """What a bayes search learns from one run, as W&B scores it: a finished run, its final value; a run stopped
    by hyperband, the best value it logged; a failed one (or one without a finite value) by ``metric.impute``:
    ``worst`` (W&B's default: the worst value any ended run logged, 0 when none did), ``best`` or ``latest`` (its
    own best or last logged value, 0 when it logged none)."""
    name, minimize = sweep.metric["name"], sweep.metric["goal"] == MINIMIZE
    status = (read_result(sweep_dir / run.run_dir) or {}).get("status")
    own = [v for v in read_history(sweep_dir / run.run_dir, name) if math.isfinite(v)]
    best = (min if minimize else max)
    if status == Status.FINISHED and (value := run_value(sweep_dir, run, name)) is not None and math.isfinite(value):
        return value
    if status == Status.STOPPED and own:
        return best(own)
    impute = sweep.metric.get("impute", "worst")
    if impute == "best":
        return best(own) if own else 0.0
    if impute == "latest":
        return own[-1] if own else 0.0
    worst = [(max if minimize else min)(h) for h in ended]
    return (max if minimize else min)(worst) if worst else 0.0


def _by_trial(runs: list[PlannedRun]) -> dict[int, list[PlannedRun]]:
    groups: dict[int, list[PlannedRun]] = {}
    for run in runs:
        if run.search is not None:
            groups.setdefault(run.search["trial"], []).append(run)
    return groups
