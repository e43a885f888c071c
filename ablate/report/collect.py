"""Reading a sweep directory: the plan, and what each of its runs has written so far.

    <sweep_dir>/plan.json                                  the runs, in order: id, variant, seed, varied keys
    <sweep_dir>/runs/<run_id>/result.json                  absent until the run starts
    <sweep_dir>/runs/<run_id>/logs/version_*/metrics.csv   every logged row (see ``read_metrics``)

Nothing here aggregates; :mod:`ablate.report.table` turns these runs into a table.
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
from ablate.runs.plan import read_plan_record
from ablate.runs.status import ENDED, Status
from ablate.stats.design import Design

@dataclass(frozen=True)
class Plan:
    """The parts of ``plan.json`` a report needs."""

    name: str
    metric: str
    goal: str
    base_variant: str
    varied_keys: tuple[str, ...]
    runs: tuple[dict[str, Any], ...]
    design: Design = Design()  # how rows are compared with the base (a fixed design when the plan names none)
    factors: tuple[dict[str, Any], ...] = ()  # the design's factors and their levels ([]: a plan without them)


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
        return _finite(final_value({"final": self.final, "best": self.best}, key))

    def diverged(self, key: str) -> bool:
        """It logged ``key`` (final, else best) as NaN or infinite."""
        source = self.final if key in self.final else self.best
        return key in source and _finite(source[key]) is None


def _finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def read_plan(sweep_dir: Path) -> Plan:
    """Read and check ``<sweep_dir>/plan.json`` (:class:`ablate.runs.plan.PlanRecord`).

    Args:
        sweep_dir: a sweep directory written by the sweep runner.

    Returns:
        The plan. ``base_variant`` defaults to the first run's variant when the plan names none.

    Raises:
        FileNotFoundError: there is no plan.json.
        ConfigError: a required key is missing or the metric is malformed (the message names the key).
    """
    record = read_plan_record(sweep_dir)
    return Plan(record.name, record.metric["name"], record.goal, record.base_variant, record.varied_keys,
                record.runs, Design.from_json(record.design) if record.design else Design(), record.factors)


def read_curve(run_dir: Path, metric: str) -> tuple[tuple[int, float], ...]:
    """The logged (step, value) points of ``metric``, in step order, finite values only."""
    points = []
    for row in read_metrics(run_dir):
        value = _finite(row.get(metric))
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
    run_dir = Path(sweep_dir) / entry.get("run_dir", Path("runs") / entry["id"])
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
               **{k: v for k, v in result.items() if EVALUATED.match(k) and _finite(v) is not None}},
        notes={f"val/loss@{f}": why for f, why in ((result.get("lengths") or {}).get("unsupported") or {}).items()},
        best=dict(result.get("best") or {}),
        tokens_per_s=_finite(result.get("tokens_per_s")),
        wall_time_s=_finite(result.get("wall_time_s")),
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


def read_runs(sweep_dir: Path, plan: Plan) -> list[RunRow]:
    """Every planned run, in plan order."""
    return [read_run(sweep_dir, entry, plan.metric) for entry in plan.runs]
