"""The report's word on cost: the wall time the launch projected (:mod:`ablate.sweep.projection`, ``projection.json``)
against the actual, from the runs' recorded wall times (``wall_time_s``, the ``evaluate:`` decode's seconds) and the
sweep's elapsed time since its runs started (its latest result.json written)."""

from __future__ import annotations

from dataclasses import dataclass

from ablate.runs.files import read_result, result_path
from ablate.report.table import Report
from ablate.runs.projection import Projection, duration, read_projection


@dataclass(frozen=True)
class Actual:
    """What the ended runs took, and what the projection gave those same runs."""

    runs: int
    elapsed: float | None  # seconds from the launch's first run to the latest result written
    run_seconds: float  # their wall_time_s, summed (training, validation, setup and checkpoints)
    projected_run_seconds: float
    evaluate_seconds: float  # the evaluate: decodes' seconds, summed
    projected_evaluate_seconds: float

    @property
    def ratio(self) -> float | None:
        """Actual over projected run-seconds (None when nothing was projected for them)."""
        return self.run_seconds / self.projected_run_seconds if self.projected_run_seconds > 0 else None


def actual_of(report: Report, projection: Projection) -> Actual:
    """The ended runs' recorded seconds against the projection's for the same runs (each run its variant's)."""
    runs, elapsed_end = [], None
    seconds = evaluate = projected = projected_evaluate = 0.0
    for run in report.runs:
        if run.wall_time_s is None:
            continue
        result = read_result(run.run_dir) or {}
        shape = projection.shapes.get(run.variant, {})
        runs.append(run)
        seconds += run.wall_time_s
        evaluate += float((result.get("decode") or {}).get("seconds") or 0.0)
        projected += sum(float(shape.get(p, 0.0)) for p in ("train", "validate", "other"))
        projected_evaluate += float(shape.get("evaluate", 0.0))
        written = result_path(run.run_dir).stat().st_mtime
        elapsed_end = written if elapsed_end is None else max(elapsed_end, written)
    elapsed = None if elapsed_end is None or projection.launched_at is None else elapsed_end - projection.launched_at
    return Actual(len(runs), elapsed, seconds, projected, evaluate, projected_evaluate)


def cost_note(report: Report) -> list[str]:
    """One line, when the launch recorded a projection: projected against actual."""
    p = read_projection(report.sweep_dir)
    if p is None:
        return []
    most = f", {duration(p.most_seconds)} at most ({p.most_runs} runs)" if p.most_seconds is not None else ""
    line = (f"cost: projected {duration(p.seconds)} for the {p.runs} runs to start{most} on {p.workers} "
            f"worker{'s' * (p.workers != 1)} ({p.device})")
    a = actual_of(report, p)
    if not a.runs:
        return [line + "; no run has ended yet."]
    elapsed = f", {duration(a.elapsed)} since the launch" if a.elapsed is not None else ""
    ratio = f" ({a.ratio:.2f}x)" if a.ratio is not None else ""
    return [f"{line}; actual: {a.runs} runs ended{elapsed}; their own time {a.run_seconds:.0f} s against "
            f"{a.projected_run_seconds:.0f} s projected for them{ratio}, evaluate {a.evaluate_seconds:.0f} s against "
            f"{a.projected_evaluate_seconds:.0f} s."]
