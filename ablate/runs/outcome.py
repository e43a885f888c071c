"""A planned run read back: what it has written so far (status, final and best values, its curve) and what it
counts for as an outcome of its variant.

    <run_dir>/result.json                  absent until the run starts
    <run_dir>/logs/version_*/metrics.csv   every logged row (see ``read_metrics``)

A sweep's sequential design (:mod:`ablate.sweep.sequential`) and its report (:mod:`ablate.report`) both read runs
through here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ablate.runs.files import final_value, read_metrics, read_result
from ablate.runs.metrics import EVALUATED  # top-level entries ``ablate evaluate`` adds to result.json
from ablate.runs.status import ENDED, Status
from ablate.runs.sweep_folder import RUNS_DIR


@dataclass(frozen=True)
class RunRow:
    """One planned run and what it has written: its status, final and best metrics, its curve."""

    id: str
    variant: str
    seed: int | None
    varied: dict[str, Any]
    status: str
    run_dir: Path
    step: int | None = None
    parameters: int | None = None
    final: dict[str, float] = field(default_factory=dict)
    best: dict[str, float] = field(default_factory=dict)
    tokens_per_s: float | None = None
    wall_time_s: float | None = None
    error: str | None = None
    precision: str | None = None  # what Lightning trained it in (``trainer.precision`` resolved), from result.json
    fused: dict[str, Any] | None = None  # a seed array's member: {members, index, array}, from result.json
    curve: tuple[tuple[int, float], ...] = ()
    notes: dict[str, str] = field(default_factory=dict)  # metric -> why the run has no value for it
    leaks_labels: bool = False  # from the plan: its mask scores positions that see their labels
    matched: dict[str, Any] | None = None  # from the plan: the budget it was matched to
    factors: dict[str, Any] = field(default_factory=dict)  # from the plan: its level of each factor

    @property
    def finished(self) -> bool:
        return self.status == Status.FINISHED

    @property
    def ended(self) -> bool:
        """Finished or failed: an outcome of its variant (a run still going, or stopped early, is not one)."""
        return self.status in ENDED

    def outcome(self, key: str) -> float | None:
        """The run as an outcome on ``key``: its value when it finished, NaN when it failed, None when it has not
        ended or never logged ``key``."""
        if self.status == Status.FAILED:
            return math.nan
        return self.value(key) if self.status == Status.FINISHED else None

    def outcome_at(self, step: int) -> float | None:
        """The run as an outcome at ``step`` of its curve (the headline metric): NaN when it failed, its value there
        when it finished or was stopped early, None when it has not ended or logged nothing at that step."""
        if self.status == Status.FAILED:
            return math.nan
        return dict(self.curve).get(step) if self.status in (Status.FINISHED, Status.STOPPED) else None

    def value(self, key: str) -> float | None:
        """The run's *final* value of ``key``, its best when the final lacks it; None when that is not finite."""
        return finite(final_value({"final": self.final, "best": self.best}, key))

    def diverged(self, key: str) -> bool:
        """It logged ``key`` (final, else best) as NaN or infinite."""
        source = self.final if key in self.final else self.best
        return key in source and finite(source[key]) is None


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def read_curve(run_dir: Path, metric: str) -> tuple[tuple[int, float], ...]:
    """The logged (step, value) points of ``metric``, in step order, finite values only."""
    points = []
    for row in read_metrics(run_dir):
        value = finite(row.get(metric))
        if value is not None and "step" in row:
            points.append((int(row["step"]), value))
    return tuple(points)


def read_run(sweep_dir: Path, entry: dict[str, Any], metric: str) -> RunRow:
    """One plan entry joined with its ``result.json`` and its ``metric`` curve.

    Args:
        sweep_dir: the sweep directory; a relative ``run_dir`` in the plan is relative to it.
        entry: one element of ``plan["runs"]``.
        metric: the headline metric, whose curve is read from metrics.csv.

    Returns:
        The run; status ``pending`` (and no numbers) when it has no result.json yet.
    """
    run_dir = Path(sweep_dir) / entry.get("run_dir", Path(RUNS_DIR) / entry["id"])
    common = dict(id=str(entry["id"]), variant=str(entry["variant"]), seed=entry.get("seed"),
                  varied=dict(entry.get("varied", {})), run_dir=run_dir,
                  leaks_labels=bool(entry.get("leaks_labels")), matched=entry.get("matched"),
                  factors=dict(entry.get("factors") or {}))
    result = read_result(run_dir)
    if result is None:
        return RunRow(status=Status.PENDING, parameters=entry.get("parameters"), **common)
    run = RunRow(
        status=str(result.get("status", Status.PENDING)),
        step=result.get("step"),
        parameters=result.get("parameters", entry.get("parameters")),
        # test/bleu sits beside "final": `ablate evaluate` adds it once training has finished
        final={**(result.get("final") or {}),
               **{k: v for k, v in result.items() if EVALUATED.match(k) and finite(v) is not None}},
        notes={f"val/loss@{f}": why for f, why in ((result.get("lengths") or {}).get("unsupported") or {}).items()},
        best=dict(result.get("best") or {}),
        tokens_per_s=finite(result.get("tokens_per_s")),
        wall_time_s=finite(result.get("wall_time_s")),
        error=result.get("error"),
        precision=result.get("precision"),
        fused=result.get("fused"),
        curve=read_curve(run_dir, metric),
        **common,
    )
    if run.finished and run.diverged(metric):  # a NaN or infinite result is a failure, whatever the run said
        value = run.final.get(metric, run.best.get(metric))
        run = replace(run, status=Status.FAILED, error=f"{metric} = {value} at the end: the run diverged")
    return run


def outcomes(runs: Iterable[RunRow], metric: str, step: int | None = None) -> dict[int, float]:
    """Ended runs by seed: a finished run's value of ``metric`` (at ``step`` of its curve, stopped runs included,
    when a step is given), NaN for a failed one; runs of one seed averaged (their finished values; NaN when all
    failed); a run without a seed counts as a seed of its own."""
    by_seed: dict[int, list[float]] = {}
    for i, run in enumerate(runs):
        value = run.outcome(metric) if step is None else run.outcome_at(step)
        if value is not None:
            by_seed.setdefault(run.seed if run.seed is not None else -1 - i, []).append(value)
    return {seed: statistics.fmean(finite) if (finite := [v for v in values if not math.isnan(v)]) else math.nan
            for seed, values in by_seed.items()}


def common_step(runs: Iterable[RunRow]) -> int | None:
    """The last step at which every finished or stopped run logged the headline metric: where runs stopped early
    (hyperband) and runs that went on are compared like with like; None when there is no such step."""
    steps = [{step for step, _ in run.curve} for run in runs if run.status in (Status.FINISHED, Status.STOPPED)]
    shared = set.intersection(*steps) if steps else set()
    return max(shared) if shared else None
