"""The wall time a sweep will take on this machine, projected before it starts: what each run costs (a short probe of
each distinct shape, :mod:`ablate.sweep.probe`), packed onto the pool's workers as the pool hands runs out.

The pool gives the next run to whichever worker is free, so a set of runs takes its makespan over the workers, which
the longest-processing-time-first greedy (:func:`makespan`) projects; for identical runs it is exact, and it is never
more than 4/3 of the best packing. A seed array is one job: its members' training and evaluation in turn (on a CPU a
fused step costs its members' solo steps, ``benchmarks/fuse.py``; on a GPU it costs less, so an array's projection
there is an upper bound), its setup once.

A sequential design (``decide.max_seeds``) runs between its fewest runs (every row decided at the first look: the runs
to start) and its most (every row to ``max_seeds``): each later look adds one seed to every row still undecided and
starts only once the look before has ended, so the most is the first look's makespan plus one per later look of a
seed of every variant. A fixed design's fewest and most are the same runs.

The launch writes the projection to ``<sweep>/projection.json`` (:func:`ablate.runs.projection.write_projection`);
the report sets it against the runs' recorded wall times (:mod:`ablate.report.cost`). ``--no-probe`` or
``ABLATE_PROBE=off`` (the test suite's default, :data:`PROBE_ENV`) skips the probe, and with it the projection.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import asdict
from typing import Sequence

from ablate.runs.projection import PARTS, Projection, RunCost, duration

PROBE_ENV = "ABLATE_PROBE"  # "off" (or 0, false, no): the dry run and the launch probe nothing, project nothing
OFF_WORDS = ("off", "0", "false", "no")
BUSY = 1.2  # a load average per core above this while probing: other work shared the cores, and slowed the probe


def probing_on() -> bool:
    """Whether a launch probes by default: unless :data:`PROBE_ENV` says off."""
    return os.environ.get(PROBE_ENV, "on").strip().lower() not in OFF_WORDS


def job_seconds(members: Sequence[RunCost]) -> float:
    """One job's seconds: a run alone, or a seed array's members in turn with its setup once (the module's note)."""
    if not members:
        return 0.0
    return members[0].other + sum(m.train + m.validate + m.evaluate for m in members)


def makespan(durations: Sequence[float], workers: int) -> float:
    """The seconds ``durations`` take on ``workers`` workers, each job to the worker free first, longest first (LPT).

    Raises:
        ValueError: ``workers`` is under 1.
    """
    if workers < 1:
        raise ValueError(f"workers {workers}: at least 1")
    loads = [0.0] * min(workers, max(1, len(durations)))
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(loads, loads[0] + d)
    return max(loads)


def _parts(costs: Sequence[RunCost]) -> dict[str, float]:
    total = sum(costs, RunCost())
    return {p: getattr(total, p) for p in PARTS}


def project(jobs: Sequence[Sequence[str]], costs: dict[str, RunCost], workers: int, *, later_looks: int = 0,
            probe_seconds: float = 0.0, device: str = "cpu", load: float | None = None,
            shared: float = 1.0) -> Projection:
    """The projection of ``jobs`` (each the variants of its runs: one for a run alone, several for a seed array) on
    ``workers``, and, with ``later_looks`` (a sequential design's looks after the first), its most runs.

    Args:
        costs: each variant's one run (:func:`ablate.sweep.probe.probe_run`), alone on its slot's threads.
        shared: the workers' threads per core (above 1: the cores are oversubscribed and every run is as many times
            slower than it was alone; each run's cost is multiplied by it).
    """
    costs = {v: c.times(max(1.0, shared)) for v, c in costs.items()}
    first = [[costs[v] for v in job] for job in jobs]
    seconds = makespan([job_seconds(job) for job in first], workers)
    flat = [c for job in first for c in job]
    projection = Projection(workers=workers, runs=len(flat), seconds=seconds, parts=_parts(flat),
                            shapes={v: asdict(c) for v, c in costs.items()}, probe_seconds=probe_seconds,
                            device=device, load=load, shared=max(1.0, shared))
    if not later_looks:
        return projection
    variants = list(dict.fromkeys(v for job in jobs for v in job))
    look = [costs[v] for v in variants]  # a seed of every variant: the most a later look adds
    most = seconds + later_looks * makespan([c.total for c in look], workers)
    return Projection(**{**asdict(projection), "most_runs": len(flat) + later_looks * len(look), "most_seconds": most,
                         "most_parts": _parts(flat + look * later_looks)})


def _breakdown(parts: dict[str, float]) -> str:
    names = {"train": "training", "validate": "validation", "evaluate": "evaluate", "other": "setup+checkpoints"}
    return ", ".join(f"{names[p]} {parts[p]:.0f} s" for p in PARTS)


def projection_lines(p: Projection) -> list[str]:
    """The dry run's lines: the wall time of the runs to start and (a sequential design) of the most runs, each with
    its run-seconds by part."""
    head = (f"projected wall time on this machine ({p.workers} worker{'s' * (p.workers != 1)}, {p.device}; "
            f"{len(p.shapes)} shape{'s' * (len(p.shapes) != 1)} probed in {p.probe_seconds:.1f} s):")
    lines = [head, f"  {p.runs} runs to start: {duration(p.seconds)} (run-seconds: {_breakdown(p.parts)})"]
    if p.most_runs is not None and p.most_seconds is not None and p.most_parts is not None:
        lines.append(f"  {p.most_runs} runs at most: {duration(p.most_seconds)} (run-seconds: "
                     f"{_breakdown(p.most_parts)})")
    if p.shared > 1:
        lines.append(f"  the workers' threads share the cores, {p.shared:g} a core: each run's probed time is "
                     f"{p.shared:g}x what it took alone (--workers fewer, or more cores)")
    if p.load is not None and p.load > BUSY:
        lines.append(f"  probed while the cores were shared (load average {p.load:.1f} a core): the runs take this "
                     "long only if other work keeps them busy")
    return lines
