"""What stops a command from outside: SIGINT (Ctrl-C) and SIGTERM (a cluster scheduler's preemption, a sweep going
away), and the one exception that says so: a run's, once it has saved what resumes it
(:class:`ablate.train.callbacks.SignalStop`), and a sweep's, whose pool passes the signal on to its runs
(:mod:`ablate.sweep.runner`). Light to import: the command line catches it."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ablate.exits import STOP_SIGNALS, signal_exit
from ablate.runs.files import last_checkpoint, resume_command

__all__ = ["FROM_OUTSIDE", "STOP_SIGNALS", "Interrupted", "sigterm_raises", "stopped_by"]


class Interrupted(BaseException):
    """A command (a run, a seed array, a sweep) was stopped by SIGINT (Ctrl-C) or SIGTERM (a scheduler's preemption, a
    sweep going away); a run raises it after saving what resumes it. Not an ``Exception``: nothing failed; not a
    ``KeyboardInterrupt`` either, which Lightning turns into ``exit(1)``.

    ``step``: where it stopped, once known; ``run_dir``: the run's folder, once made; ``removed``: training had not
    started in a folder the command made, now removed; ``checkpoint`` and ``command``: what it resumes from and the
    command that resumes it, when they are not a solo run's in ``run_dir`` (a seed array's: its own checkpoint,
    ``ablate train-array``)."""

    def __init__(self, signum: int, step: int | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.step = int(signum), step
        self.run_dir: Path | None = None
        self.removed = False
        self.checkpoint: Path | None = None
        self.command: str | None = None

    def __str__(self) -> str:
        """The one line ``ablate`` prints: what stopped the run, where, and the command that resumes it."""
        if self.run_dir is None or self.removed:
            return (f"interrupted by {self.name} before training started: nothing was written"
                    + (f" ({self.run_dir} was new: removed, as it was before)" if self.run_dir else ""))
        last = self.checkpoint or last_checkpoint(self.run_dir)
        where = ("before training started" if self.step is None else
                 f"at step {self.step}, saved in {last}" if last.is_file() else
                 f"at step {self.step}, before its first checkpoint")
        return f"interrupted by {self.name} {where}; resume with: {self.command or resume_command(self.run_dir)}"

    @property
    def error(self) -> str:
        """What the ``error`` of a run it stopped records."""
        return f"interrupted by {self.name}"

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """What a shell reports for a process that a signal ended: 128 + the signal's number (130, 143)."""
        return signal_exit(self.signum)


# what a command stopped from outside raises: Ctrl-C's own KeyboardInterrupt (before a handler of ablate's is installed,
# or where Python's default one stands), or Interrupted
FROM_OUTSIDE = (KeyboardInterrupt, Interrupted)


def stopped_by(exc: BaseException) -> int:
    """The signal that ``exc``, one of :data:`FROM_OUTSIDE`, says stopped the command (a KeyboardInterrupt: SIGINT)."""
    return exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Interrupted` in the main thread, as SIGINT raises
    KeyboardInterrupt: a command stopped before it has anything to save says so in one line and exits 143, instead of
    dying silently. (A run installs its own handler once it starts: :class:`ablate.train.callbacks.SignalStop`.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
