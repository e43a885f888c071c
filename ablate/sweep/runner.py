"""The sweep's pool: the queue's runs handed out as jobs, one per free slot, on the sweep's backend, and their ends
counted.

- Where a job runs is the backend's (:class:`Backend`): this machine's child processes (:class:`LocalBackend`, one
  slot per GPU or CPU share: :mod:`ablate.sweep.slots`), a Ray cluster or Slurm. Every backend runs a job through
  :func:`ablate.sweep.job.run_job`, so the pool, the queue, hyperband and the records are the same for all.
- A run whose result says ``finished`` (or ``stopped``, ended early by hyperband) is skipped; ``failed`` is
  skipped unless ``retry_failed``; anything else (never started, interrupted, killed) runs, and resumes
  from its last checkpoint. Runs are handed out by a queue (:mod:`ablate.sweep.queue`): the plan in order,
  or a Bayesian search's proposals; none is started once a run reaches ``metric.target``.
- With ``early_terminate: {type: hyperband}``, the pool reads every run's validation history
  (``progress.json``) every few seconds and asks the runs W&B's rule would stop to stop (``STOP``).
- Each run holds a lock on its directory while it trains (see :mod:`ablate.runs.lock`), so two
  sweep processes on the same sweep never train the same run twice.
- A signal that stops the sweep process (SIGTERM too: :func:`ablate.train.signals.sigterm_raises`) stops the pool
  (:meth:`Backend.stop`): its runs save the step they are in, and a relaunch resumes them.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol

from omegaconf import OmegaConf

from ablate.exits import EXIT_LOCKED
from ablate.runs.files import read_history, read_result
from ablate.runs.metrics import VAL_LOSS
from ablate.runs.status import Status
from ablate.stats.design import DEFAULT_GOAL
from ablate.sweep.arrays import Fusing, seed_arrays
from ablate.sweep.children import Children
from ablate.sweep.job import Ended, Job, run_job
from ablate.sweep.hyperband import Hyperband
from ablate.sweep.plan import PlannedRun
from ablate.sweep.progress import look_line, progress_bar
from ablate.sweep.queue import RunQueue
from ablate.train.life import StopFile
from ablate.train.signals import FROM_OUTSIDE, stopped_by


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # finished before, or running elsewhere
    stopped: list[str] = field(default_factory=list)  # ended early by hyperband
    interrupted: list[str] = field(default_factory=list)  # stopped from outside (Ctrl-C, SIGTERM): a relaunch resumes
    closed: str | None = None  # why the sweep started no more runs (metric.target reached)


def pending(runs: list[PlannedRun], sweep_dir: Path, retry_failed: bool,
            evaluate: list[str] | None = None) -> tuple[list[PlannedRun], Outcome]:
    """The runs still to do, and the outcome of those already settled. A finished run whose evaluation
    (``evaluate``: ``ablate evaluate`` options) has not been done with these options is still to do."""
    todo, outcome = [], Outcome()
    for run in runs:
        result = read_result(sweep_dir / run.run_dir) or {}
        status = result.get("status")
        if status == Status.FINISHED and evaluate is not None and result.get("evaluated") != list(evaluate):
            todo.append(run)
        elif status in (Status.FINISHED, Status.STOPPED):
            outcome.skipped.append(run.id)
        elif status == Status.FAILED and not retry_failed:
            outcome.failed[run.id] = (read_result(sweep_dir / run.run_dir) or {}).get("error", "failed")
        else:
            todo.append(run)
    return todo, outcome


class Backend(Protocol):
    """Where a sweep's jobs run: this machine's pool (:class:`LocalBackend`), a Ray cluster
    (:mod:`ablate.sweep.ray_backend`) or Slurm (:mod:`ablate.sweep.slurm_backend`). Each runs a job through
    :func:`ablate.sweep.job.run_job`, on its node; the pool (:func:`execute`) is the same for all."""

    fuses: bool  # whether its jobs may be seed arrays

    def submit(self, jobs: list[tuple[Job, dict[str, str]]]) -> list[Callable[[], list[Ended]]]:
        """Start each job (with its slot's environment); one function per job that waits for it and returns one
        (exit code, error) per run. Called from the pool's thread; the waits run in worker threads."""

    def stop(self, signum: int) -> None:
        """The sweep process was stopped by ``signum``: make the waits return soon (the jobs that run on this
        machine are sent the signal; a cluster's jobs go on, and a relaunch finds them)."""


class LocalBackend:
    """Jobs in child processes of this one (:mod:`ablate.sweep.children`), each in its slot's environment."""

    fuses = True

    def __init__(self, sweep_dir: Path, *, cwd: Path | None = None, fresh: bool = False):
        self.sweep_dir, self.cwd, self.fresh = sweep_dir, cwd, fresh
        self.children = Children()

    def submit(self, jobs: list[tuple[Job, dict[str, str]]]) -> list[Callable[[], list[Ended]]]:
        return [functools.partial(run_job, job, self.sweep_dir, env=env, children=self.children, cwd=self.cwd,
                                  fresh=self.fresh) for job, env in jobs]

    def stop(self, signum: int) -> None:
        """Ctrl-C reached the children from the terminal; SIGTERM sent to the sweep alone is passed on to them."""
        self.children.stop(signum, pass_on=signum != signal.SIGINT)


def execute(queue: RunQueue, config_of: Callable[[PlannedRun], str], sweep_dir: Path, *, slots: list[dict[str, str]],
            backend: Backend | None = None, progress: bool = True, evaluate: list[str] | None = None,
            hyperband: Hyperband | None = None, metric: str = VAL_LOSS, goal: str = DEFAULT_GOAL,
            settled: list[PlannedRun] = (), fusing: Fusing | None = None) -> Outcome:
    """Run what the queue hands out, a job per free slot, until it has nothing more; returns what was done,
    failed, stopped and skipped.

    Args:
        queue: the runs to do (:mod:`ablate.sweep.queue`).
        config_of: a run's resolved config YAML (with output_dir set).
        sweep_dir: the sweep directory.
        slots: one environment per job that may run at once (:func:`ablate.sweep.slots.slots`).
        backend: where jobs run (default: :class:`LocalBackend`, child processes on this machine).
        evaluate: ``ablate evaluate`` options to run on each run once it has trained (the sweep's ``evaluate``).
        hyperband: early termination: every few seconds, the running runs that W&B's hyperband rule would stop
            are asked to stop (``<run_dir>/STOP``), judged on ``metric`` against every run's history.
        settled: runs of earlier launches, whose histories count for hyperband.
        fusing: which runs train as seed arrays, how many members each (:mod:`ablate.sweep.arrays`); None, or a
            backend that does not fuse: every run alone.
    """
    backend = backend or LocalBackend(sweep_dir)
    alone = fusing is None or not backend.fuses
    outcome = Outcome()
    by_look = queue.look() is not None  # a plan that grows by looks: a line that says so, not a bar
    ended, started, seconds = {r.id for r in settled}, {}, {}

    def line() -> str:
        return "sweep: " + look_line(queue.look(), ended, seconds, len(slots))

    bar = progress_bar(total=None if by_look else queue.total, initial=len(settled),
                       desc=line() if by_look else "sweep", disable=not progress,
                       **({"bar_format": "{desc}"} if by_look else {}))
    free, running = list(range(len(slots))), {}
    seen = [*settled]

    texts: dict[str, str] = {}  # each run's config, rendered (validated) once: grouping reads it, the worker writes it

    def text_of(run: PlannedRun) -> str:
        if run.id not in texts:
            texts[run.id] = config_of(run)
        return texts[run.id]

    members = (lambda run: ([run], [run])) if alone else seed_arrays(
        queue, lambda r: OmegaConf.create(text_of(r)), fusing, len(slots), sweep_dir)
    options = None if evaluate is None else tuple(evaluate)

    def wait_for(waiter: Callable[[], list[Ended]], array: list[PlannedRun], group: list[PlannedRun]) -> list[Ended]:
        return [e for r, e in zip(array, waiter()) if r in group]  # an array's members that ended before: reported then

    with contextlib.closing(bar), ThreadPoolExecutor(max_workers=len(slots)) as pool, _passed_on(backend):
        while True:
            batch = []  # the jobs that start now: a cluster backend submits them together
            while free and (run := queue.next()) is not None:
                slot, (array, group) = free.pop(), members(run)
                batch.append((Job(tuple(array), tuple(text_of(r) for r in array), options), slot, array, group))
                seen.extend(group)
            if batch:
                for group_run in (r for *_, group in batch for r in group):
                    started[group_run.id] = time.monotonic()
                waiters = backend.submit([(job, slots[slot]) for job, slot, _, _ in batch])
                for waiter, (_, slot, array, group) in zip(waiters, batch):
                    running[pool.submit(wait_for, waiter, array, group)] = (group, slot)
            if not running:
                break
            done, _ = wait(running, timeout=MONITOR_EVERY if hyperband else None, return_when=FIRST_COMPLETED)
            returned = []
            for future in done:
                group, slot = running.pop(future)
                free.append(slot)
                returned += zip(group, future.result())
            for run, (code, error) in returned:
                status = (read_result(sweep_dir / run.run_dir) or {}).get("status")
                if code == EXIT_LOCKED:
                    outcome.skipped.append(run.id)
                elif status == Status.INTERRUPTED:
                    outcome.interrupted.append(run.id)
                elif code != 0:
                    outcome.failed[run.id] = error
                elif status == Status.STOPPED:
                    outcome.stopped.append(run.id)
                else:
                    outcome.done.append(run.id)
                if code != EXIT_LOCKED and status != Status.INTERRUPTED:
                    ended.add(run.id)
                    seconds[run.id] = time.monotonic() - started[run.id]
                queue.settled(run)
                if by_look:
                    bar.set_description_str(line(), refresh=False)  # drawn once, by update
                else:
                    bar.set_postfix(done=len(outcome.done) + len(outcome.skipped), stopped=len(outcome.stopped),
                                    failed=len(outcome.failed), refresh=False)
                bar.update(1)
            if hyperband is not None:
                _stop_runs(hyperband, sweep_dir, seen, [r for g, _ in running.values() for r in g], metric, goal)
    outcome.closed = queue.closed
    return outcome


@contextlib.contextmanager
def _passed_on(backend: Backend) -> Iterator[None]:
    """A signal that stops the pool stops its jobs before the pool waits for them (:meth:`Backend.stop`)."""
    try:
        yield
    except FROM_OUTSIDE as stop:
        backend.stop(stopped_by(stop))
        raise


MONITOR_EVERY = 2.0  # seconds between hyperband checks


def _stop_runs(rule: Hyperband, sweep_dir: Path, runs: list[PlannedRun], running: list[PlannedRun], metric: str,
               goal: str) -> None:
    histories = {r.id: read_history(sweep_dir / r.run_dir, metric) for r in runs}
    for run_id, reason in rule.to_stop(histories, [r.id for r in running], goal).items():
        StopFile(sweep_dir / next(r.run_dir for r in running if r.id == run_id)).request(reason)
