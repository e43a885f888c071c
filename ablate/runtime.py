"""Process-level settings: the memory allocator, and a run process's tie to the sweep that started it.

glibc's malloc maps and unmaps the large per-step buffers of a training loop every step (hundreds of
thousands of page faults per step). ablate's heavy commands raise glibc's mmap and trim thresholds
at start-up (``mallopt``), so freed blocks are reused instead of returned to the kernel:
``benchmarks/allocator.py`` measured 1.07x the default's tokens/s with 9x fewer page faults on this
project's CPU, where preloading jemalloc was 0.82x. Child processes (sweep workers, DDP ranks) run
the same start-up. ``ABLATE_ALLOCATOR=system`` leaves malloc alone; ``ABLATE_ALLOCATOR=jemalloc``
re-executes the command with the system's jemalloc preloaded (``apt-get install libjemalloc2``).

A run a sweep starts as a fresh interpreter dies with the sweep (:func:`die_with_parent`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from pathlib import Path
from typing import Sequence

REEXEC_FLAG = "ABLATE_ALLOCATOR_APPLIED"
DIE_WITH = "ABLATE_DIE_WITH"  # a sweep's pid, set for the fresh run processes it starts
LEAVE_SIGNALS = "ABLATE_LEAVE_SIGNALS"  # signals a run process leaves to the process that started it (names, commas)
PR_SET_PDEATHSIG = 1  # prctl option, from linux/prctl.h
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, from glibc's malloc.h
THRESHOLD = 1 << 30  # keep up to 1 GiB of freed memory; serve blocks below it from the heap
_SEARCH = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")
_state = {"allocator": "glibc"}


def find_jemalloc() -> str | None:
    """The path of the system's jemalloc shared library, if installed."""
    for folder in _SEARCH:
        path = Path(folder) / "libjemalloc.so.2"
        if path.is_file():
            return str(path)
    name = ctypes.util.find_library("jemalloc")
    return name if name and Path(name).is_absolute() else None


def tune_glibc_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; False where malloc is not glibc's."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD) == 1 and libc.mallopt(M_TRIM_THRESHOLD, THRESHOLD) == 1
    except (OSError, AttributeError):
        return False
    if ok:
        _state["allocator"] = "glibc (tuned)"
    return ok


def apply_fast_allocator(argv: Sequence[str]) -> None:
    """Set up the allocator for a heavy command (``ABLATE_ALLOCATOR``: auto, system or jemalloc).

    ``jemalloc`` re-executes ``python -m ablate.cli ARGV`` once with it preloaded.
    """
    choice = os.environ.get("ABLATE_ALLOCATOR", "auto")
    if choice == "system" or "jemalloc" in os.environ.get("LD_PRELOAD", ""):
        return
    lib = find_jemalloc() if choice == "jemalloc" else None
    if lib and not os.environ.get(REEXEC_FLAG):
        env = dict(os.environ, **{REEXEC_FLAG: "1", "LD_PRELOAD": ":".join(
            p for p in (lib, os.environ.get("LD_PRELOAD", "")) if p)})
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", "ablate.cli", *argv], env)
    tune_glibc_malloc()


def allocator_in_use() -> str:
    """``jemalloc``, ``glibc (tuned)`` or ``glibc``, from this process's memory maps and state."""
    try:
        if "libjemalloc" in Path("/proc/self/maps").read_text():
            return "jemalloc"
    except OSError:
        pass
    return _state["allocator"]


def die_with_parent() -> None:
    """In a run process a sweep started as a fresh interpreter (``ABLATE_DIE_WITH``: the sweep's pid): SIGTERM to
    this process when the one that started it dies (PR_SET_PDEATHSIG, Linux), so a run does not outlive its sweep.

    Set here, in the child after exec, not between fork and exec (subprocess's ``preexec_fn``, which Python documents
    as unsafe in a process with threads, as a sweep's pool is); the signal is kept across exec (the jemalloc
    re-exec). The variable is removed, so the processes a run starts itself (DDP ranks) are not tied to the sweep.
    """
    parent = os.environ.pop(DIE_WITH, None)
    if parent is None or sys.platform != "linux":
        return
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        return
    if os.getppid() != int(parent):  # the sweep died before the prctl: nothing would send the signal now
        os.kill(os.getpid(), signal.SIGTERM)


def leave_signals() -> None:
    """In a run process started by a Slurm job's wrapper (``ABLATE_LEAVE_SIGNALS=SIGUSR2``): ignore those signals.

    Slurm sends the time limit's warning (``--signal=USR2@T``) to every process of the job step, the run process
    too, whose default for SIGUSR2 is to die on the spot, its step unsaved. The wrapper takes the signal and stops the
    run itself with SIGTERM, which the run answers by saving its step (:mod:`ablate.sweep.slurm_backend`). Ignored
    signals stay ignored across exec; the variable is removed, so that a run's own children are not affected.
    """
    names = os.environ.pop(LEAVE_SIGNALS, "")
    for name in filter(None, (n.strip() for n in names.split(","))):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
