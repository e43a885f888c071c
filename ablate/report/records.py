"""The report as records for machines: table.csv, runs.csv and the W&B table.

Full precision, with separate mean, std and n columns and None for unknown, so the files read back exactly.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from ablate.report.table import LEAKS, Report, Stat, VariantRow


def _stat_fields(stat: Stat | None) -> list[Any]:
    return [stat.mean, stat.std, stat.n] if stat else [None, None, 0]


# row_failed, row_runs, base_failed, base_runs: the runs the comparison's look counts (``failed`` is every run's)
COMPARISON = ("ci_low", "ci_high", "ci_level", "p_adj", "paired", "pairs", "seeds_better", "verdict", "decided_at",
              "detectable_delta", "margin", "seeds_for_margin_low", "seeds_for_margin_high", "row_failed",
              "row_runs", "base_failed", "base_runs", "failure_p", "compared_at_step", "skew", "skewed", "sign_flip_p",
              "leaks_labels", "matched_by", "matched_value")


def table_columns(report: Report) -> list[str]:
    """Columns of the machine-readable variant table (table.csv, the W&B table)."""
    stats = [f"{key}_{part}" for key in report.metric_keys for part in ("mean", "std", "n")]
    return ["variant", "stratum", "is_base", "status", *report.varied_keys, "parameters", "runs", "finished", "failed",
            *stats, f"{report.metric}_delta", *COMPARISON, "tokens_per_s_mean", "tokens_per_s_std", "tokens_per_s_n",
            "wall_time_s_mean", "wall_time_s_std", "wall_time_s_n", "first_error"]


def _comparison_fields(row: VariantRow) -> list[Any]:
    c, m = row.comparison, row.matched or {}
    if c is None:
        fields: list[Any] = [None] * (len(COMPARISON) - 3)
        fields[COMPARISON.index("verdict")] = "base" if row.is_base else None
    else:
        fields = [*(c.interval or (None, None)), c.level, c.p, c.paired, c.n, c.better,
                  LEAKS if row.leaks_labels else c.statement, c.decided_at, c.detectable, c.margin,
                  *(c.seeds_for_margin or (None, None)), *c.failed, c.failure_p, c.step, c.skew, c.skewed,
                  c.sign_flip_p]
    return [*fields, row.leaks_labels, m.get("by"), m.get("value")]


def table_records(report: Report) -> list[list[Any]]:
    """One list of raw values per variant, aligned with :func:`table_columns`; None where unknown."""
    return [[row.name, row.stratum, row.is_base, row.status, *(row.varied.get(k) for k in report.varied_keys),
             row.parameters, row.n_runs, row.n_finished, row.n_failed,
             *(x for key in report.metric_keys for x in _stat_fields(row.metrics[key])), row.delta,
             *_comparison_fields(row), *_stat_fields(row.tokens_per_s), *_stat_fields(row.wall_time_s), row.first_error]
            for row in report.variants]


def run_columns(report: Report) -> list[str]:
    """Columns of runs.csv: identity, status, headline value, every final and best metric."""
    final = sorted({k for run in report.runs for k in run.final})
    best = sorted({k for run in report.runs for k in run.best})
    return ["id", "variant", "seed", *report.varied_keys, "status", "step", "parameters", report.metric,
            *(f"final/{k}" for k in final), *(f"best/{k}" for k in best), "tokens_per_s", "wall_time_s",
            "run_dir", "error"]


def run_records(report: Report) -> list[list[Any]]:
    """One list of raw values per run, in plan order, aligned with :func:`run_columns`."""
    final = sorted({k for run in report.runs for k in run.final})
    best = sorted({k for run in report.runs for k in run.best})
    return [[run.id, run.variant, run.seed, *(run.varied.get(k) for k in report.varied_keys), run.status, run.step,
             run.parameters, run.value(report.metric), *(run.final.get(k) for k in final),
             *(run.best.get(k) for k in best), run.tokens_per_s, run.wall_time_s,
             _relative(run.run_dir, report), run.error]
            for run in report.runs]


def _relative(path: Any, report: Report) -> str:
    try:
        return str(path.relative_to(report.sweep_dir))
    except ValueError:
        return str(path)


def to_csv(columns: list[str], records: list[list[Any]]) -> str:
    """CSV text; None is an empty cell, floats keep every digit (``repr``), so values read back exactly."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([["" if v is None else v for v in record] for record in records])
    return buf.getvalue()


EFFECT_COLUMNS = ("effect", "kind", "delta", "ci_low", "ci_high", "ci_level", "p_adj", "verdict", "pairs", "decided_at")


def effect_records(report: Report) -> list[list[Any]]:
    """A two-factor design's effects and a ladder's slopes (kind ``trend``), aligned with :data:`EFFECT_COLUMNS`."""
    rows = [(e.contrast.label, e.contrast.kind, e.comparison) for e in report.effects]
    rows += [(f"{t.row}: Δ per doubling of size", "trend", t.slope) for t in report.trends]
    return [[name, kind, *((c.diff, *(c.interval or (None, None)), c.level, c.p, c.statement, c.n, c.decided_at)
                           if c is not None else [None] * 8)] for name, kind, c in rows]
