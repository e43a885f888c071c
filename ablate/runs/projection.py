"""A sweep's ``projection.json``: the wall time its first launch projected on this machine, the one record that the
launch writes (:mod:`ablate.sweep.projection`) and the report reads (:mod:`ablate.report.cost`), below both.

    <sweep_dir>/projection.json   workers, device, runs and seconds (the runs to start), most_runs and most_seconds
                                  (a sequential design's most; null for a fixed one), parts and most_parts (their
                                  run-seconds by part: train, validate, evaluate, other), shapes (each variant's one
                                  run, by part), probe_seconds, launched_at (when its runs started, Unix seconds),
                                  load (the machine's load average a core while the probe ran), shared (workers'
                                  threads per core: the factor the probe's seconds were multiplied by)
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ablate.runs.files import read_json, write_json
from ablate.runs.sweep_folder import projection_path

PARTS = ("train", "validate", "evaluate", "other")  # a run's seconds: other is its setup and checkpoint writes


@dataclass(frozen=True)
class RunCost:
    """One run's projected seconds, by part: training steps, validations, the ``evaluate:`` decode, and the rest
    (building the model and data, writing checkpoints)."""

    train: float = 0.0
    validate: float = 0.0
    evaluate: float = 0.0
    other: float = 0.0

    @property
    def total(self) -> float:
        return self.train + self.validate + self.evaluate + self.other

    def __add__(self, other: RunCost) -> RunCost:
        return RunCost(*(getattr(self, p) + getattr(other, p) for p in PARTS))

    def times(self, factor: float) -> RunCost:
        """Every part ``factor`` times as long."""
        return RunCost(*(getattr(self, p) * factor for p in PARTS))


@dataclass(frozen=True)
class Projection:
    """A sweep's projected wall time on this machine's ``workers``: its fewest runs (the runs to start) and, under a
    sequential design, its most; each with its run-seconds by part (:data:`PARTS`)."""

    workers: int
    runs: int
    seconds: float
    parts: dict[str, float]
    most_runs: int | None = None
    most_seconds: float | None = None
    most_parts: dict[str, float] | None = None
    shapes: dict[str, dict[str, float]] = field(default_factory=dict)  # variant -> its one run's RunCost
    probe_seconds: float = 0.0
    device: str = "cpu"
    launched_at: float | None = None
    load: float | None = None  # the machine's load average a core, as the probe ran (over 1: the cores were shared)
    shared: float = 1.0  # how many workers' threads share each core (more than 1: each run slows by as much)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Projection:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def duration(seconds: float) -> str:
    """Seconds as the dry run prints them: ``95 s``, ``754 s (12.6 min)``, ``9000 s (2.5 h)``."""
    text = f"{seconds:.0f} s"
    if seconds >= 2 * 3600:
        return f"{text} ({seconds / 3600:.1f} h)"
    return f"{text} ({seconds / 60:.1f} min)" if seconds >= 120 else text


def write_projection(sweep_dir: Path, p: Projection) -> None:
    """Record the first launch's projection (atomically); a relaunch keeps it: the report compares the whole sweep."""
    path = projection_path(sweep_dir)
    if not path.is_file():
        write_json(path, {**p.to_json(), "launched_at": p.launched_at or time.time()})


def read_projection(sweep_dir: Path) -> Projection | None:
    """The recorded projection, or None when the launch made none (or the file is not as written)."""
    path = projection_path(sweep_dir)
    data = read_json(path) if path.is_file() else None
    try:
        return Projection.from_json(data) if isinstance(data, dict) else None
    except TypeError:
        return None
