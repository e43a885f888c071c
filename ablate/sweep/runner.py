"""Running a sweep locally: a pool of workers, each run in its own ``ablate train`` process.

- One worker per GPU, pinned with CUDA_VISIBLE_DEVICES; on CPU, ``workers`` processes sharing
  the cores (OMP_NUM_THREADS = cores / workers, so they do not fight over them). Each run is a process forked
  from a warm server that has imported torch and Lightning already (:mod:`ablate.sweep.warm`).
- A run whose result says ``finished`` (or ``stopped``, ended early by hyperband) is skipped; ``failed`` is
  skipped unless ``retry_failed``; anything else (never started, interrupted, killed) runs, and resumes
  from its last checkpoint. Runs are handed out by a queue (:mod:`ablate.sweep.queue`): the plan in order,
  or a Bayesian search's proposals; none is started once a run reaches ``metric.target``.
- With ``early_terminate: {type: hyperband}``, the pool reads every run's validation history
  (``progress.json``) every few seconds and asks the runs W&B's rule would stop to stop (``STOP``).
- Each run holds a lock on its directory while it trains (see :mod:`ablate.runs.lock`), so two
  sweep processes on the same sweep never train the same run twice.
- A child process dies with the sweep process (PR_SET_PDEATHSIG on Linux, :func:`ablate.runtime.die_with_parent`);
  its last checkpoint stays.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from omegaconf import OmegaConf

from ablate.runs.files import (STOP_FILE, config_path, log_path, read_history, read_result, result_path, write_atomic,
                               write_json)
from ablate.runs.lock import EXIT_LOCKED
from ablate.runs.status import Status
from ablate.runtime import DIE_WITH
from ablate.sweep import warm
from ablate.sweep.arrays import Fusing, seed_arrays
from ablate.sweep.hyperband import Hyperband
from ablate.sweep.plan import PlannedRun
from ablate.sweep.progress import look_line, progress_bar
from ablate.sweep.queue import RunQueue
from ablate.train.threads import usable_cores


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


class Interrupted(KeyboardInterrupt):
    """A signal that stops a sweep as Ctrl-C does (``signum``: which)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def interrupt_on(signum: int) -> Iterator[None]:
    """Within the block, ``signum`` (SIGTERM: a scheduler's preemption) stops the sweep as Ctrl-C does: the pool
    passes it on to its runs (each then saves what resumes it) and waits for them."""
    def stop(number: int, frame: Any) -> None:
        raise Interrupted(number)

    try:
        previous = signal.signal(signum, stop)
    except ValueError:  # not the main thread: leave the signal as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signum, previous)


_CHILDREN: set[int] = set()  # the run processes this sweep process has running now (their pids)
_STOPPING: list[int] = []  # the signal that stopped the pool, once one did: a run that starts after it is stopped too


def _stop_children(signum: int) -> None:
    """Pass ``signum`` on to the runs still running (Ctrl-C reaches them from the terminal; a SIGTERM sent to the
    sweep process alone does not)."""
    for pid in list(_CHILDREN):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


MAX_PER_GPU = 16  # runs-per-gpu auto never packs more than this many runs on one GPU


@dataclass(frozen=True)
class Gpu:
    """One visible GPU: its index and free memory (bytes)."""

    index: int
    free: int


def visible_gpus() -> list[Gpu]:
    """The GPUs of this machine with their free memory now."""
    if not torch.cuda.is_available():
        return []
    return [Gpu(i, torch.cuda.mem_get_info(i)[0]) for i in range(torch.cuda.device_count())]


def slots(*, workers: int, runs_per_gpu: str | int = 1, gpus: list[Gpu] | None = None, run_bytes: int | None = None,
          cores: int | None = None) -> list[dict[str, str]]:
    """The environment of each worker: which GPU it sees and how many CPU threads it may use.

    Args:
        workers: CPU workers when there is no GPU.
        runs_per_gpu: runs sharing each GPU, or ``auto``: as many as fit in the GPU's free memory at
            ``run_bytes`` each (at least one, at most :data:`MAX_PER_GPU`).
        gpus: the GPUs (default: this machine's); cores: CPU cores to share (default: this machine's).

    Returns:
        One environment per slot; every slot gets an equal share of the cores (at least one thread).
    """
    gpus = visible_gpus() if gpus is None else gpus
    cores = cores or usable_cores()
    if not gpus:
        devices = [""] * workers
    else:
        devices = []
        for gpu in gpus:
            if runs_per_gpu == "auto":
                k = 1 if not run_bytes else int(min(MAX_PER_GPU, max(1, gpu.free // run_bytes)))
            else:
                k = int(runs_per_gpu)
            devices += [str(gpu.index)] * k
    threads = str(max(1, cores // len(devices)))
    return [{"CUDA_VISIBLE_DEVICES": d, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads} for d in devices]


def _train(run: PlannedRun, sweep_dir: Path, config_text: str, env: dict[str, str],
           cwd: Path | None, fresh: bool) -> tuple[int, str]:
    run_dir = sweep_dir / run.run_dir
    code = _ablate(["train", str(_write_config(run_dir, config_text))], log_path(run_dir), env, cwd, fresh)
    return code, _ended(run_dir, code, log_path(run_dir))


def _write_config(run_dir: Path, config_text: str) -> Path:
    """``<run_dir>/config.yaml`` (the folder made first), what ``ablate train`` and ``train-array`` read."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(config_path(run_dir), config_text)
    return config_path(run_dir)


def _ended(run_dir: Path, code: int, log: Path) -> str:
    """Record in ``result.json`` how a run's process ended when the run could not say so itself (killed, or gone
    before it started); returns its error (or the exit code)."""
    result = read_result(run_dir) or {}
    if code not in (0, EXIT_LOCKED) and result.get("status") in (None, Status.RUNNING):
        why = f"{_why(code, log)}; see {log}"
        if code in INTERRUPTED:  # stopped from outside, even before it could say so itself: it resumes
            result.update(status=Status.INTERRUPTED, error=why)
        else:
            result.update(status=Status.FAILED, error=why)
        write_json(result_path(run_dir), result)
    return result.get("error", f"exit code {code}")


def train_array_here(runs: list[PlannedRun], sweep_dir: Path, config_texts: list[str], env: dict[str, str],
                     evaluate: list[str] | None, cwd: Path | None = None,
                     fresh: bool = False) -> list[tuple[int, str]]:
    """Train ``runs`` (seeds of one variant) as one seed array in a child process (``ablate train-array``), then
    evaluate each finished member; one (exit code, error) per run. The array's output goes to
    ``<sweep_dir>/arrays/<first id>+<others>.log``, which each member's ``train.log`` names."""
    paths = [str(_write_config(sweep_dir / run.run_dir, text)) for run, text in zip(runs, config_texts)]
    log = sweep_dir / "arrays" / f"{runs[0].id}+{len(runs) - 1}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    for run in runs:
        with open(log_path(sweep_dir / run.run_dir), "a") as out:
            out.write(f"ablate: trained as a member of a seed array of {len(runs)}; its output: {log}\n")
    code = _ablate(["train-array", *paths], log, env, cwd, fresh)
    ended = []
    for run in runs:
        run_dir = sweep_dir / run.run_dir
        error = _ended(run_dir, code, log)
        status = (read_result(run_dir) or {}).get("status")
        mine = 1 if code == 0 and status == Status.FAILED else code  # a member that failed alone in a good array
        if mine == 0 and evaluate is not None and status == Status.FINISHED:
            mine, error = _evaluate(run_dir, list(evaluate), env, cwd, fresh)
        ended.append((mine, error))
    return ended


# Exit codes of a run stopped from outside: Ctrl-C (ablate's 130, or the signal itself before ablate could catch
# it), SIGTERM (the sweep going away, a scheduler preempting). Such a run is interrupted, not failed.
INTERRUPTED = {130, -signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGTERM}


def _ablate(args: list[str], log: Path, env: dict[str, str], cwd: Path | None, fresh: bool = False) -> int:
    """Run ``ablate ARGS`` in a child process that dies with this one, its output appended to ``log``;
    returns its exit code (negative: the signal that killed it). The child is forked from the warm server
    (:mod:`ablate.sweep.warm`) unless ``fresh`` or the warm server is off: then a new interpreter."""
    if not fresh and warm.enabled():
        return warm.run(args, log, env, cwd, started=_started, ended=_CHILDREN.discard)
    with open(log, "ab") as out:
        child = subprocess.Popen([sys.executable, "-m", "ablate.cli", *args], stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**os.environ, **env, DIE_WITH: str(os.getpid())},
                                 cwd=cwd)  # in the sweep's process group: Ctrl-C reaches it from the terminal
        _started(child.pid)
        try:
            return child.wait()
        finally:
            _CHILDREN.discard(child.pid)


def _started(pid: int) -> None:
    """Count a run process as running; one that started after the pool was stopped is stopped (SIGTERM: it may not
    take Ctrl-C yet), and resumes on relaunch."""
    _CHILDREN.add(pid)
    if _STOPPING:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _why(code: int, log: Path) -> str:
    """Why a run ended without recording a reason: the signal that killed it (SIGKILL: the kernel's OOM killer,
    most often), or the last line it printed."""
    if code < 0:
        name = signal.Signals(-code).name
        return f"killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    return f"exit code {code}: {lines[-1]}" if lines else f"exit code {code}"


def train_here(run: PlannedRun, sweep_dir: Path, config_text: str, env: dict[str, str],
               evaluate: list[str] | None, cwd: Path | None = None, fresh: bool = False) -> tuple[int, str]:
    """Train a run in a child process on this machine, then evaluate it (``evaluate``: ablate evaluate's options);
    ``cwd``: the folder relative paths in its config are relative to (default: this process's); ``fresh``: a new
    interpreter rather than a fork of the warm server."""
    code, error = _train(run, sweep_dir, config_text, env, cwd, fresh)
    if (code == 0 and evaluate is not None
            and (read_result(sweep_dir / run.run_dir) or {}).get("status") == Status.FINISHED):
        code, error = _evaluate(sweep_dir / run.run_dir, list(evaluate), env, cwd, fresh)
    return code, error


def _evaluate(run_dir: Path, options: list[str], env: dict[str, str], cwd: Path | None,
              fresh: bool) -> tuple[int, str]:
    """``ablate evaluate RUN_DIR OPTIONS`` after training; result.json records the options once it succeeded."""
    code = _ablate(["evaluate", str(run_dir), *options], run_dir / "evaluate.log", env, cwd, fresh)
    if code == 0:
        write_json(result_path(run_dir), {**(read_result(run_dir) or {}), "evaluated": list(options)})
        return 0, ""
    lines = (run_dir / "evaluate.log").read_text(errors="replace").strip().splitlines()
    return code, f"ablate evaluate failed: {lines[-1] if lines else code}; see {run_dir / 'evaluate.log'}"


def execute(queue: RunQueue, config_of: Callable[[PlannedRun], str], sweep_dir: Path, *, slots: list[dict[str, str]],
            progress: bool = True, evaluate: list[str] | None = None, hyperband: Hyperband | None = None,
            metric: str = "val/loss", goal: str = "minimize", settled: list[PlannedRun] = (),
            train: Callable[..., tuple[int, str]] | None = None, fusing: Fusing | None = None) -> Outcome:
    """Run what the queue hands out, a worker per slot, until it has nothing more; returns what was done,
    failed, stopped and skipped.

    Args:
        queue: the runs to do (:mod:`ablate.sweep.queue`).
        config_of: a run's resolved config YAML (with output_dir set).
        sweep_dir: the sweep directory.
        slots: one environment per run that may train at once (:func:`slots`).
        evaluate: ``ablate evaluate`` options to run on each run once it has trained (the sweep's ``evaluate``).
        hyperband: early termination: every few seconds, the running runs that W&B's hyperband rule would stop
            are asked to stop (``<run_dir>/STOP``), judged on ``metric`` against every run's history.
        settled: runs of earlier launches, whose histories count for hyperband.
        train: trains one run and evaluates it when asked, ``train(run, sweep_dir, config_text, env, evaluate)
            -> (exit code, error)``; default: :func:`train_here`, a subprocess on this machine (the Ray backend
            sends it to a cluster's node instead).
        fusing: which runs train as seed arrays, how many members each (:mod:`ablate.sweep.arrays`); None: every
            run alone (a ``train`` of its own trains one run at a time).
    """
    alone = train is not None or fusing is None
    train = train or train_here
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

    def work(array: list[PlannedRun], group: list[PlannedRun], slot: int) -> list[tuple[int, str]]:
        for run in group:
            started[run.id] = time.monotonic()
        if len(array) == 1:
            return [train(group[0], sweep_dir, text_of(group[0]), slots[slot], evaluate)]
        ended = train_array_here(array, sweep_dir, [text_of(r) for r in array], slots[slot], evaluate)
        return [e for r, e in zip(array, ended) if r in group]  # its members that ended before: reported then

    with contextlib.closing(bar), ThreadPoolExecutor(max_workers=len(slots)) as pool, _passed_on():
        while True:
            while free and (run := queue.next()) is not None:
                slot, (array, group) = free.pop(), members(run)
                running[pool.submit(work, array, group, slot)] = (group, slot)
                seen.extend(group)
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
def _passed_on() -> Iterator[None]:
    """A signal that stops the pool stops its runs before the pool waits for them: SIGTERM (:class:`Interrupted`)
    is passed on to them, Ctrl-C reached them from the terminal; a run that starts after either is stopped too."""
    _STOPPING.clear()
    try:
        yield
    except KeyboardInterrupt as stop:
        _STOPPING.append(getattr(stop, "signum", signal.SIGINT))
        if isinstance(stop, Interrupted):
            _stop_children(stop.signum)
        raise


MONITOR_EVERY = 2.0  # seconds between hyperband checks


def _stop_runs(rule: Hyperband, sweep_dir: Path, runs: list[PlannedRun], running: list[PlannedRun], metric: str,
               goal: str) -> None:
    histories = {r.id: read_history(sweep_dir / r.run_dir, metric) for r in runs}
    for run_id, reason in rule.to_stop(histories, [r.id for r in running], goal).items():
        stop = sweep_dir / next(r.run_dir for r in running if r.id == run_id) / STOP_FILE
        if not stop.exists():
            write_atomic(stop, reason + "\n")
