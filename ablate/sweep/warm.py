"""A warm worker: each run's ``ablate train`` (and ``ablate evaluate``) in a process forked from one that has already
imported torch, Lightning and ablate (Python's forkserver), instead of a fresh interpreter that imports them again.

A fresh ``python -m ablate.cli train`` spends seconds importing before its first step, and a sweep of short runs
pays that per run (``benchmarks/startup.py``). A forked run is still a process of its own: its own memory, RNG state
and CUDA context (the server never touches CUDA), the environment of its slot (devices, threads), its output
appended to its log, stdin closed, the exit code a subprocess would give (negative: the signal that killed it), and
it dies when the sweep dies (the server exits when the sweep process does; each run asks for SIGTERM when the server
goes). Interpreter exit is reproduced (stdio flushed, ``atexit`` handlers run).

The forkserver stays up while any process it forked lives, so a run cannot wait for its parent (the server) to die
as a subprocess would: a thread of the run waits on multiprocessing's sentinel of the sweep process that started it
and sends the run SIGTERM when the sweep is gone (as PR_SET_PDEATHSIG did), whatever killed it.

``ABLATE_WARM=0`` starts a fresh interpreter per run instead, as ``ABLATE_ALLOCATOR=jemalloc`` (preloaded at exec)
and platforms without fork do.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

# wandb too: a run that logs to W&B (the default) would import it again, seconds of pydantic building its settings'
# schemas, against once per sweep here (benchmarks/run_split.py splits a run's time). And what wandb.init imports on
# first use: its launch inputs (wandb.apis.public's pydantic models), requests, and the module WandbLogger imports Run
# from; tests/sweep/test_warm.py checks that a run's W&B run starts without importing anything, so a wandb release
# that imports something else on first use is caught there.
PRELOAD = ["ablate.sweep.warm_signals", "torch", "pytorch_lightning", "wandb", "wandb.sdk.launch.inputs.internal",
           "requests", "wandb.wandb_run", "ablate.entry", "ablate.train.run", "ablate.evaluate.cli"]
# Temporary folders wandb makes when it is imported, removed at exit; a run forked from the server shares them.
SHARED_TEMPORARY = (("wandb.sdk.data_types._private", "MEDIA_TMP"),
                    ("wandb.sdk.artifacts.artifact", "Artifact._TMP_DIR"))
_context: list[multiprocessing.context.BaseContext] = []


def enabled() -> bool:
    """Whether runs start from the warm server on this machine."""
    return (os.environ.get("ABLATE_WARM", "1") != "0" and os.environ.get("ABLATE_ALLOCATOR") != "jemalloc"
            and "forkserver" in multiprocessing.get_all_start_methods())


def _forkserver() -> multiprocessing.context.BaseContext:
    if not _context:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context.append(context)
    return _context[0]


def run(args: list[str], log: Path, env: dict[str, str], cwd: Path | None,
        started: Callable[[int], None] = lambda pid: None, ended: Callable[[int], None] = lambda pid: None) -> int:
    """``ablate ARGS`` in a process forked from the warm server, its output appended to ``log``; its exit code
    (``started``, ``ended``: told its pid once it runs, and once it has ended)."""
    process = _forkserver().Process(target=_child, args=(list(args), str(log), dict(env), cwd and str(cwd)),
                                    daemon=False)
    with _STARTING, _without_main():
        process.start()
    started(process.pid)
    try:
        process.join()
    finally:
        ended(process.pid)
    return process.exitcode


_STARTING = threading.Lock()


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """Hide the caller's main module while a run starts: multiprocessing would re-run it in the run to rebuild its
    globals, which a run never uses, and a script without an ``if __name__ == "__main__"`` guard would launch its
    sweep again inside every run."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _die_with(parent: multiprocessing.process.BaseProcess | None) -> None:
    """SIGTERM to this process once ``parent`` (the sweep process that started it) has died."""
    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGTERM)

    if parent is not None:
        threading.Thread(target=watch, name="ablate-die-with-sweep", daemon=True).start()


def _leave_shared_temporary_folders() -> None:
    """Keep this run from removing, at its exit, the temporary folders the server's imports made (``SHARED_TEMPORARY``):
    every later run uses them too; the server removes them when it exits."""
    for module, path in SHARED_TEMPORARY:
        folder = sys.modules.get(module)
        for name in path.split("."):
            folder = getattr(folder, name, None)
        if isinstance(folder, tempfile.TemporaryDirectory):
            folder._finalizer.detach()
            atexit.unregister(folder.cleanup)


def settle(env: dict[str, str]) -> None:
    """In a process just forked from the server: the process-level state a run starts from (its slot's environment,
    its allocator and threads, its ties to the sweep and to the server's files)."""
    # The objects the server's imports made (some 400,000: torch, Lightning, wandb) go to the permanent generation:
    # the run's first full collection traversed them all (0.4 s a run on the 2-core CPU: benchmarks/run_split.py)
    # and wrote to every page holding one (copy-on-write copies of memory the runs share). They live as long as the
    # run anyway. gc.freeze's documentation recommends it for a fork without exec.
    gc.freeze()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the server ignores Ctrl-C (ablate.sweep.warm_signals)
    os.environ.update(env)
    from ablate.runtime import tune_glibc_malloc

    _die_with(multiprocessing.parent_process())
    _leave_shared_temporary_folders()
    tune_glibc_malloc()
    if env.get("OMP_NUM_THREADS"):  # torch was imported under the server's environment: set its pool here
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))


def _child(args: list[str], log: str, env: dict[str, str], cwd: str | None) -> None:
    """In the forked process: become ``ablate ARGS`` with the slot's environment, writing to ``log``."""
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.dup2(null, 0)
    os.close(out)
    os.close(null)
    settle(env)
    if cwd:
        os.chdir(cwd)
    sys.argv = ["ablate", *args]
    from ablate.entry import main  # what `ablate train`, `train-array` and `evaluate` run: one program, forked or not

    code = main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()  # what the interpreter would do at exit; multiprocessing ends a child with os._exit
    sys.exit(code)
