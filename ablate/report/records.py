"""The report as records for machines: table.csv, runs.csv and the W&B table.

Full precision, with separate mean, std and n columns and None for unknown, so the files read back exactly.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from ablate.report.columns import columns
from ablate.report.table import Report


def table_columns(report: Report) -> list[str]:
    """Columns of the machine-readable variant table (table.csv, the W&B table): each column's CSV names, in the
    order of :func:`ablate.report.columns.columns`."""
    return [name for column in columns(report) for name in column.csv]


def table_records(report: Report) -> list[list[Any]]:
    """One list of raw values per variant, aligned with :func:`table_columns`; None where unknown."""
    table = columns(report)
    return [[value for column in table for value in column.raw(row)] for row in report.variants]


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
