"""How many CPU threads a run's torch ops use: ``trainer.threads``.

torch takes every core by default, which is right for a lone run on an idle machine and wrong beside another job:
on this project's 2-core CPU, a 200-step run beside a busy process took 72 s with two threads and 20 s with one.
So the count is a setting, and ``ablate train`` says what it took:

- ``trainer.threads: N``: N threads.
- ``trainer.threads: null`` (the default): the share a sweep's pool gives each of its runs (``OMP_NUM_THREADS``, set
  by :func:`ablate.sweep.runner.slots`: the cores split evenly between the runs that train at once), else, for a lone
  run, every core this process may run on (its CPU affinity, e.g. ``taskset``'s).
"""

from __future__ import annotations

import os

import torch

from ablate.errors import ConfigError


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``'s, a container's cpuset), not the machine's
    count, so that a sweep launched on part of a machine shares that part between its runs."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def resolve_threads(setting: int | None) -> tuple[int, str]:
    """The threads a run uses and why, e.g. ``(2, "every core this process may use")``.

    Raises:
        ConfigError: ``setting`` is not a positive whole number or null.
    """
    if setting is not None:
        if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
            raise ConfigError("trainer.threads", setting, "a positive whole number of CPU threads, or null (the "
                              "pool's share of the cores in a sweep, else every core)")
        return setting, "trainer.threads"
    share = os.environ.get("OMP_NUM_THREADS", "")
    if share.isdigit() and int(share) >= 1:
        return int(share), "OMP_NUM_THREADS: a sweep pool's share of the cores, or yours"
    return usable_cores(), "every core this process may use; trainer.threads=1 beside another busy job"


def use_threads(setting: int | None) -> str:
    """Set torch's thread count from ``trainer.threads`` (:func:`resolve_threads`) and say it in one line.

    Raises:
        ConfigError: as :func:`resolve_threads`.
    """
    threads, why = resolve_threads(setting)
    torch.set_num_threads(threads)
    return f"ablate: training with {threads} CPU thread{'s' if threads > 1 else ''} ({why})"
