"""Process-level speed settings that must be in place before the process starts: the memory allocator.

glibc's malloc maps and unmaps the large per-step buffers of a training loop every step (tens of
thousands of page faults a second, a sixth of the CPU in the kernel). jemalloc keeps them. ablate
re-executes its own heavy commands once, early, with jemalloc preloaded when the system has it
(Debian/Ubuntu: ``apt-get install libjemalloc2``), else with glibc tunables that stop the churn.
``ABLATE_ALLOCATOR=system`` turns this off; child processes (sweep workers, DDP ranks) inherit it.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from pathlib import Path
from typing import Sequence

REEXEC_FLAG = "ABLATE_ALLOCATOR_APPLIED"
# Keep freed memory up to 1 GiB instead of returning it to the kernel after every step, and serve
# large blocks from the heap rather than fresh mmaps.
GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824"
_SEARCH = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


def find_jemalloc() -> str | None:
    """The path of the system's jemalloc shared library, if installed."""
    for folder in _SEARCH:
        path = Path(folder) / "libjemalloc.so.2"
        if path.is_file():
            return str(path)
    name = ctypes.util.find_library("jemalloc")
    return name if name and Path(name).is_absolute() else None


def allocator_env(environ: dict[str, str]) -> dict[str, str] | None:
    """The environment to re-execute with, or None when nothing needs to change."""
    if sys.platform != "linux" or environ.get(REEXEC_FLAG) or environ.get("ABLATE_ALLOCATOR") == "system":
        return None
    if "jemalloc" in environ.get("LD_PRELOAD", "") or "malloc" in environ.get("GLIBC_TUNABLES", ""):
        return None  # the user chose already
    env = dict(environ, **{REEXEC_FLAG: "1"})
    lib = find_jemalloc()
    if lib:
        env["LD_PRELOAD"] = ":".join(p for p in (lib, environ.get("LD_PRELOAD", "")) if p)
    else:
        env["GLIBC_TUNABLES"] = ":".join(p for p in (environ.get("GLIBC_TUNABLES", ""), GLIBC_TUNABLES) if p)
    return env


def apply_fast_allocator(argv: Sequence[str]) -> None:
    """Re-execute ``python -m ablate.cli ARGV`` with the fast allocator, once; returns if no change is needed."""
    env = allocator_env(dict(os.environ))
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "ablate.cli", *argv], env)


def allocator_in_use() -> str:
    """``jemalloc``, ``glibc (tuned)`` or ``glibc``, from this process's memory maps and environment."""
    try:
        if "libjemalloc" in Path("/proc/self/maps").read_text():
            return "jemalloc"
    except OSError:
        pass
    return "glibc (tuned)" if "malloc" in os.environ.get("GLIBC_TUNABLES", "") else "glibc"
