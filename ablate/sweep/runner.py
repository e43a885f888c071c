"""Running a planned sweep locally: a pool of workers, each run in its own ``ablate train`` process.

- One worker per GPU, pinned with CUDA_VISIBLE_DEVICES; on CPU, ``workers`` processes sharing
  the cores (OMP_NUM_THREADS = cores / workers, so they do not fight over them).
- A run whose result says ``finished`` is skipped; ``failed`` is skipped unless ``retry_failed``;
  anything else (never started, interrupted, killed) runs, and resumes from its last checkpoint.
- Each run holds a lock on its directory while it trains (see :mod:`ablate.runs.lock`), so two
  sweep processes on the same sweep never train the same run twice.
- A child process dies with the sweep process (PR_SET_PDEATHSIG on Linux); its last checkpoint stays.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from ablate.sweep.plan import PlannedRun
from ablate.runs.lock import EXIT_LOCKED
from ablate.runs.files import read_result, write_atomic, write_json


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # finished before, or running elsewhere


def pending(runs: list[PlannedRun], sweep_dir: Path, retry_failed: bool,
            evaluate: list[str] | None = None) -> tuple[list[PlannedRun], Outcome]:
    """The runs still to do, and the outcome of those already settled. A finished run whose evaluation
    (``evaluate``: ``ablate evaluate`` options) has not been done with these options is still to do."""
    todo, outcome = [], Outcome()
    for run in runs:
        result = read_result(sweep_dir / run.run_dir) or {}
        status = result.get("status")
        if status == "finished" and evaluate is not None and result.get("evaluated") != list(evaluate):
            todo.append(run)
        elif status == "finished":
            outcome.skipped.append(run.id)
        elif status == "failed" and not retry_failed:
            outcome.failed[run.id] = (read_result(sweep_dir / run.run_dir) or {}).get("error", "failed")
        else:
            todo.append(run)
    return todo, outcome


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _devices(workers: int) -> list[dict[str, str]]:
    """Per-worker environment: one GPU each when there are GPUs, a share of the cores otherwise."""
    if torch.cuda.is_available():
        return [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(torch.cuda.device_count())]
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    return [{"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "CUDA_VISIBLE_DEVICES": ""}] * workers


def _train(run: PlannedRun, sweep_dir: Path, config_text: str, env: dict[str, str]) -> tuple[int, str]:
    run_dir = sweep_dir / run.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / "config.yaml", config_text)
    with open(run_dir / "train.log", "ab") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "ablate.cli", "train", str(run_dir / "config.yaml")],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **env}, preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    result = read_result(run_dir) or {}
    if proc.returncode not in (0, EXIT_LOCKED) and result.get("status") in (None, "running"):
        # Killed before it could say why: the kernel's OOM killer, most often.
        how = f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        result.update(status="failed", error=f"{how} (out of memory?); see {run_dir / 'train.log'}")
        write_json(run_dir / "result.json", result)
    return proc.returncode, result.get("error", f"exit code {proc.returncode}")


def _evaluate(run_dir: Path, options: list[str], env: dict[str, str]) -> tuple[int, str]:
    """``ablate evaluate RUN_DIR OPTIONS`` after training; result.json records the options once it succeeded."""
    with open(run_dir / "evaluate.log", "ab") as log:
        proc = subprocess.run([sys.executable, "-m", "ablate.cli", "evaluate", str(run_dir), *options],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **env},
                              preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    result = read_result(run_dir) or {}
    if proc.returncode == 0:
        write_json(run_dir / "result.json", {**result, "evaluated": list(options)})
        return 0, ""
    lines = (run_dir / "evaluate.log").read_text(errors="replace").strip().splitlines()
    return proc.returncode, f"ablate evaluate failed: {lines[-1] if lines else proc.returncode}; see {run_dir / 'evaluate.log'}"


def execute(runs: list[PlannedRun], configs: dict[str, str], sweep_dir: Path, *, workers: int,
            retry_failed: bool = False, progress: bool = True, evaluate: list[str] | None = None) -> Outcome:
    """Run every pending run of the plan; returns what was done, failed and skipped.

    Args:
        runs: the plan.
        configs: run id -> resolved config YAML (with output_dir set).
        sweep_dir: the sweep directory.
        workers: CPU worker processes (ignored on GPUs: one per device).
        evaluate: ``ablate evaluate`` options to run on each run once it has trained (the sweep's ``evaluate``).
    """
    todo, outcome = pending(runs, sweep_dir, retry_failed, evaluate)
    slots = _devices(workers)
    free = list(range(len(slots)))
    lock = threading.Lock()
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc="sweep", unit="run", disable=not progress,
               file=sys.stderr)

    def work(run: PlannedRun) -> None:
        with lock:
            slot = free.pop()
        try:
            code, error = _train(run, sweep_dir, configs[run.id], slots[slot])
            if code == 0 and evaluate is not None:
                code, error = _evaluate(sweep_dir / run.run_dir, list(evaluate), slots[slot])
        finally:
            with lock:
                free.append(slot)
        with lock:
            if code == 0:
                outcome.done.append(run.id)
            elif code == EXIT_LOCKED:
                outcome.skipped.append(run.id)
            else:
                outcome.failed[run.id] = error
            bar.set_postfix(done=len(outcome.done) + len(outcome.skipped), failed=len(outcome.failed),
                            left=len(runs) - len(outcome.done) - len(outcome.skipped) - len(outcome.failed))
            bar.update(1)

    with ThreadPoolExecutor(max_workers=len(slots)) as pool:
        list(pool.map(work, todo))
    bar.close()
    return outcome

