"""One process at a time per run directory: an advisory lock (flock) held while a run trains.

The kernel drops the lock when its holder exits, however it exits (SIGKILL included), so a
crashed run never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ablate.errors import ConfigError
from ablate.exits import EXIT_LOCKED  # noqa: F401  (its exit code, named where the lock is)


class RunLocked(RuntimeError):
    """Another process is training this run directory right now."""


LOCK_FILE = ".lock"


def held(run_dir: Path) -> bool:
    """Whether a process holds the run's lock now (it trains: ``ablate status``'s question, asked without taking it
    for longer than the asking)."""
    path = Path(run_dir) / LOCK_FILE
    if not path.is_file():
        return False
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``<run_dir>/.lock`` for the duration of the block; a block refused with a ConfigError leaves no lock
    file it created.

    Raises:
        RunLocked: another process holds it.
    """
    path = Path(run_dir) / LOCK_FILE
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(f"{run_dir} is being trained by another process") from None
        yield
    except ConfigError:  # refused before anything ran: leave the folder as it was
        if created:
            path.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
