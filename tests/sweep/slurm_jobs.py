"""What tests/sweep/test_slurm_cluster.py runs inside its Slurm jobs: callables that submitit pickles (by reference,
so the job's Python imports this module: keep it free of pytest and of heavy imports), and a child process that
records the signals it gets (``python3 -m tests.sweep.slurm_jobs child RECORD GO``).

A job never waits on time: it waits for a file the test writes (or for the signal the test is about), with a
deadline that only guards against a hung job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import submitit

JOB_DEADLINE_S = 300
POLL_S = 0.1
# The exit status of a process that ends itself on SIGTERM, as a shell reports one killed by it (128 + 15).
SIGTERM_EXIT = 143


def restart_count() -> str | None:
    """``SLURM_RESTART_COUNT`` in this job's environment: absent on the first attempt, "1" on the second."""
    return os.environ.get("SLURM_RESTART_COUNT")


def wait_for(path: Path) -> None:
    """Returns once ``path`` exists; raises after :data:`JOB_DEADLINE_S` (a test that never wrote it)."""
    deadline = time.monotonic() + JOB_DEADLINE_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {JOB_DEADLINE_S} s")
        time.sleep(POLL_S)


def describe(x: int) -> dict:
    """A plain function's result, with what Slurm told the job about itself."""
    return {"double": 2 * x, "job_id": os.environ["SLURM_JOB_ID"], "cpus": os.environ.get("SLURM_CPUS_PER_TASK"),
            "restart": restart_count()}


class CountSteps(submitit.helpers.Checkpointable):
    """Counts ``steps`` steps into ``folder/progress``, a line ``<restart> <step>`` each, resuming after the last step
    recorded there. On its first attempt it stops before step ``hold`` until ``folder/go`` exists (the test requeues
    it there instead). ``checkpoint()`` (which submitit calls on SIGUSR2 only) leaves ``folder/checkpointed``."""

    def __init__(self, folder: str, steps: int, hold: int) -> None:
        self.folder, self.steps, self.hold = folder, steps, hold

    def __call__(self) -> dict:
        folder, restart = Path(self.folder), restart_count()
        progress = folder / "progress"
        first = len(progress.read_text().splitlines()) if progress.exists() else 0
        for step in range(first, self.steps):
            if step == self.hold and restart is None:
                wait_for(folder / "go")
            with progress.open("a") as f:
                f.write(f"{restart or 0} {step}\n")
        return {"restart": restart, "resumed_at": first, "steps": self.steps}

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        (Path(self.folder) / "checkpointed").write_text("checkpoint() called\n")
        return super().checkpoint(*args, **kwargs)


class OutlastTimeLimit(submitit.helpers.Checkpointable):
    """Waits, on its first attempt, for the SIGUSR2 that Slurm sends before the time limit, with a recording child
    (:func:`child`) beside it. ``checkpoint()`` marks the instance, which submitit pickles for the next attempt,
    so the second attempt's result shows it ran from the checkpoint."""

    def __init__(self, folder: str) -> None:
        self.folder, self.attempts, self.checkpointed = folder, 0, False

    def __call__(self) -> dict:
        self.attempts += 1
        folder = Path(self.folder)
        if self.attempts == 1:
            record = folder / "child.log"
            subprocess.Popen([sys.executable, "-m", __name__, "child", str(record), str(folder / "go")])
            wait_for(record)
            wait_for(folder / "go")  # never written: the time limit's signal ends this attempt
        return {"attempts": self.attempts, "checkpointed": self.checkpointed, "restart": restart_count()}

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        self.checkpointed = True
        return super().checkpoint(*args, **kwargs)


def run_child(folder: str, exit_on_sigterm: bool) -> dict:
    """Runs :func:`child` (recording into ``folder/child.log``) and waits for it. On the first attempt the test
    requeues the job while the child runs. ``exit_on_sigterm``: when the child then ends with
    :data:`SIGTERM_EXIT`, leave the job at once (``sys.exit``: submitit records no result) rather than return."""
    folder_ = Path(folder)
    restart = restart_count()
    if restart is None:
        code = subprocess.call([sys.executable, "-m", __name__, "child", str(folder_ / "child.log"),
                                str(folder_ / "go")])
        (folder_ / "first_child_exit").write_text(str(code))
        if code == SIGTERM_EXIT and exit_on_sigterm:
            sys.exit(code)
        return {"restart": restart, "child_exit": code}
    return {"restart": restart, "first_child_exit": int((folder_ / "first_child_exit").read_text())}


def child(record: Path, go: Path) -> None:
    """A stand-in for a training process: appends ``<time> ready`` to ``record``, then ``<time> got <SIGNAL>`` for
    each SIGCONT and SIGUSR2 it gets (and carries on), and on SIGTERM writes ``<time> got SIGTERM`` and exits
    :data:`SIGTERM_EXIT` (as a trainer that saves its step would). Ends with 0 once ``go`` exists."""

    def note(text: str) -> None:
        with record.open("a") as f:
            f.write(f"{time.time():.3f} {text}\n")

    def on_signal(signum, frame) -> None:
        note(f"got {signal.Signals(signum).name}")
        if signum == signal.SIGTERM:
            sys.exit(SIGTERM_EXIT)

    for signum in (signal.SIGTERM, signal.SIGCONT, signal.SIGUSR2):
        signal.signal(signum, on_signal)
    note("ready")
    wait_for(go)


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(Path(sys.argv[2]), Path(sys.argv[3]))
