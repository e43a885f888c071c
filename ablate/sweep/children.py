"""The run processes one pool (or one cluster job) has running, and how a signal that stops it reaches them.

Every ``ablate train``, ``train-array`` and ``evaluate`` a sweep starts is a child process, forked from the warm
server (:mod:`ablate.sweep.warm`) or a fresh interpreter, that dies with the process that started it. Ctrl-C reaches
the children from the terminal; a SIGTERM sent to the sweep process alone (a scheduler's preemption, a Slurm job's
time limit) does not, so :meth:`Children.stop` passes it on. Each child then saves the step it is in and records
itself interrupted (:mod:`ablate.train.signals`); a child that starts after the stop is stopped as it starts.

One :class:`Children` per pool, made by whoever runs the pool: nothing here is module state, so two pools in one
process (tests, a Slurm job's wrapper) never see each other's processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ablate.runtime import DIE_WITH
from ablate.sweep import warm


class Children:
    """The pids of the run processes running now, and the signal that stopped them, once one did."""

    def __init__(self) -> None:
        self._pids: set[int] = set()
        self._lock = threading.Lock()
        self.stopped_by: int | None = None

    def started(self, pid: int) -> None:
        """Count ``pid`` as running; stop it at once if the pool was stopped before it started (with SIGTERM: a
        process that has just started may not take Ctrl-C yet); it resumes on relaunch."""
        with self._lock:
            self._pids.add(pid)
            stopping = self.stopped_by is not None
        if stopping:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def ended(self, pid: int) -> None:
        with self._lock:
            self._pids.discard(pid)

    def stop(self, signum: int, *, pass_on: bool = True) -> None:
        """Mark the pool stopped by ``signum``; with ``pass_on``, send it to every child still running (Ctrl-C has
        reached them from the terminal already)."""
        with self._lock:
            self.stopped_by = int(signum)
            pids = list(self._pids)
        for pid in pids if pass_on else ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    @property
    def running(self) -> list[int]:
        with self._lock:
            return sorted(self._pids)


def run_ablate(args: list[str], log: Path, env: dict[str, str], cwd: Path | None, children: Children, *,
               fresh: bool = False) -> int:
    """Run ``ablate ARGS`` in a child process that dies with this one, its output appended to ``log``; its exit code
    (negative: the signal that killed it). The child is forked from the warm server unless ``fresh`` or the warm
    server is off (:func:`ablate.sweep.warm.enabled`): then a new interpreter, in this process's group (Ctrl-C
    reaches it from the terminal)."""
    if not fresh and warm.enabled():
        return warm.run(args, log, env, cwd, started=children.started, ended=children.ended)
    with open(log, "ab") as out:
        child = subprocess.Popen([sys.executable, "-m", "ablate.cli", *args], stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**os.environ, **env, DIE_WITH: str(os.getpid())},
                                 cwd=cwd)
        children.started(child.pid)
        try:
            return child.wait()
        finally:
            children.ended(child.pid)
