"""Seeds started ahead of the looks (:mod:`ablate.sweep.sequential`): with two workers and a look of three runs no
worker idles while the design may still need a run, the verdicts are the barrier's on the same outcomes, and a
relaunch after a kill mid-look trains only what is missing.

The sweep's queue is built by the functions ``ablate sweep`` builds it with (:func:`ablate.sweep.launch.plan_queue`,
:func:`ablate.sweep.launch.open_queue`: its plan, plan.json, the runs' result.json), and driven by a
pool of simulated workers in steps of time: each run takes one step and ends with the value ``OUTCOMES`` gives its
seed, so the schedule, and so every assertion, is deterministic. Nothing trains.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ablate.report import build_report
from ablate.runs.status import Status
from ablate.sweep import load_sweep
from ablate.sweep.launch import open_queue, plan_queue
from ablate.sweep.plan import Planner, read_planned
from ablate.sweep.sequential import SequentialQueue
from tests.sweep.conftest import plan_of, sweep_file

ROWS = """
    - {name: base}
    - {name: broken, model.dropout: 0.11}
    - {name: close, model.dropout: 0.12}
    - {name: unclear, model.dropout: 0.13}
"""
DECIDE = """
parameters:
  seed: {values: [0, 1, 2]}
decide: {max_seeds: 8, margin: 0.1}
"""
_noise = np.random.default_rng(7).normal(0.0, 1.0, size=(4, 8))
# val/loss by row and seed: broken is decided worse at the first look; close and unclear (paired noise of sd 0.15
# and 0.4 against the base) stay undecided a few looks, so most looks are three runs: the base, close and unclear
OUTCOMES = {"base": 2.0 + 0.05 * _noise[0], "broken": 3.0 + 0.05 * _noise[1],
            "close": 2.0 + 0.05 * _noise[0] + 0.15 * _noise[2], "unclear": 2.05 + 0.05 * _noise[0] + 0.4 * _noise[3]}

SLOW_BASE = {"base": 2}  # the base's runs take two steps of time, the others one


class Pool:
    """A sweep's queue and ``workers`` simulated workers: :meth:`step` fills the free workers as the runner's pool
    does (``queue.next()`` until it says None), then ends every run started a step ago and settles it."""

    def __init__(self, tmp: Path, workers: int = 2, steps: dict[str, int] | None = None):
        sweep = load_sweep(tmp / "sweep.yaml")
        self.sweep_dir, self.workers = tmp / "sweeps" / "spec", workers
        runs, queue_for = plan_queue(sweep, self.sweep_dir, Planner(sweep, [], check=False), dry_run=False,
                                     earlier=read_planned(self.sweep_dir))
        self.queue, _ = open_queue(sweep, self.sweep_dir, runs, queue_for, retry_failed=False)  # as a launch does
        self.first_todo = [r.id for r in self.queue.todo]
        self.started: list[str] = []
        self.busy: list[int] = []  # workers busy at each step
        self.running: list = []
        self.ends: dict[str, int] = {}  # the step at which each running run ends
        self.at: dict[str, int] = {}  # the step at which each run started
        self.steps, self.now = steps or {}, 0  # steps each variant's runs take (1 unless given), the time

    def start(self) -> None:
        """Start runs on the free workers."""
        while len(self.running) < self.workers and (run := self.queue.next()) is not None:
            self.running.append(run)
            self.started.append(run.id)
            self.ends[run.id] = self.now + self.steps.get(run.variant, 1)
            self.at[run.id] = self.now

    def step(self) -> bool:
        """One step of time; False once the queue has nothing more and no run is running."""
        self.start()
        if not self.running:
            return False
        self.busy.append(len(self.running))
        self.now += 1
        ended = [r for r in self.running if self.ends[r.id] == self.now]
        self.running = [r for r in self.running if r not in ended]
        for run in ended:
            result = {"status": Status.FINISHED, "final": {"val/loss": float(OUTCOMES[run.variant][run.seed])}}
            (self.sweep_dir / run.run_dir).mkdir(parents=True, exist_ok=True)
            (self.sweep_dir / run.run_dir / "result.json").write_text(json.dumps(result))
            self.queue.settled(run)
        return True

    def run(self) -> Pool:
        while self.step():
            pass
        return self


def _sweep(tmp: Path) -> Path:
    path = sweep_file(tmp, ROWS, name="spec")
    path.write_text(path.read_text() + DECIDE)
    return tmp


def _verdicts(sweep_dir: Path) -> list[tuple]:
    return [(r.name, r.comparison.verdict, r.comparison.decided_at, r.comparison.look)
            for r in build_report(sweep_dir).variants if not r.is_base]


def _seeds(sweep_dir: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for run in plan_of(sweep_dir)["runs"]:
        out.setdefault(run["variant"], []).append(run["seed"])
    return out


@pytest.fixture(scope="module")
def barrier(tmp_path_factory) -> Pool:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ABLATE_SPECULATE", "0")
        return Pool(_sweep(tmp_path_factory.mktemp("barrier")), steps=SLOW_BASE).run()


def test_the_barrier_leaves_a_worker_idle_at_a_look_of_three_runs(barrier):
    """What speculation is for: the outcomes make looks of three runs, and at one of them the barrier idles a worker
    while the sweep still has runs to start."""
    idle = barrier.busy.index(1)
    assert barrier.busy[:idle] == [2] * idle and max(barrier.at.values()) > idle


@pytest.mark.parametrize("steps", [SLOW_BASE, {"unclear": 2}])
def test_no_worker_idles_while_the_design_may_need_a_run(tmp_path, barrier, steps, monkeypatch):
    ahead = _record_ahead(monkeypatch)
    pool = Pool(_sweep(tmp_path), steps=steps).run()
    idle = pool.busy.index(1) if 1 in pool.busy else len(pool.busy)
    assert pool.busy[:idle] == [2] * idle and max(pool.at.values()) <= idle  # once a worker idles, no run starts
    assert ahead  # it took seeds ahead of their looks to get there
    seeds, needed = _seeds(pool.sweep_dir), _seeds(barrier.sweep_dir)
    for variant, mine in seeds.items():  # the runs the barrier trained, and at most the seed after them ahead
        assert mine[:len(needed[variant])] == needed[variant] and len(mine) <= len(needed[variant]) + 1, variant


def test_the_verdicts_are_the_barriers_on_the_same_outcomes(tmp_path, barrier):
    pool = Pool(_sweep(tmp_path), steps=SLOW_BASE).run()
    verdicts = _verdicts(pool.sweep_dir)
    assert verdicts == _verdicts(barrier.sweep_dir)
    assert [v for _, v, _, _ in verdicts] == ["worse", "better", "undecided"]  # decided at 3, at 7; undecided at 8


@pytest.mark.parametrize("killed_at", [9, 13])
def test_a_relaunch_after_a_kill_mid_look_trains_only_what_is_missing(tmp_path, barrier, killed_at, monkeypatch):
    """Killed after ``killed_at`` steps, a run of a look and one started ahead in flight, the relaunch starts none of
    the runs that ended, keeps them all in the plan, and ends with the verdicts of the sweep that was never killed."""
    ahead = _record_ahead(monkeypatch)
    first = Pool(_sweep(tmp_path), steps=SLOW_BASE)
    for _ in range(killed_at):
        first.step()
    first.start()
    cut = {r.id for r in first.running}  # killed: no result.json
    assert len(cut) == 2 and cut & set(ahead)
    ended = set(first.started) - cut
    again = Pool(tmp_path, steps=SLOW_BASE)
    assert {r["id"] for r in plan_of(again.sweep_dir)["runs"]} >= ended
    assert set(again.first_todo) <= cut  # what the replayed looks ask for that has not ended: the cut run of a look
    again.run()
    assert not set(again.started) & ended  # nothing that ended trains again
    assert _verdicts(again.sweep_dir) == _verdicts(barrier.sweep_dir)
    assert {r["id"] for r in plan_of(again.sweep_dir)["runs"]} == ended | set(again.started)


def _record_ahead(monkeypatch) -> list[str]:
    """The runs :meth:`SequentialQueue.speculate` hands out from now on (ids), in order."""
    ahead, speculate = [], SequentialQueue.speculate

    def recorded(queue):
        run = speculate(queue)
        ahead.extend([run.id] if run else [])
        return run

    monkeypatch.setattr(SequentialQueue, "speculate", recorded)
    return ahead
