"""Comparison reports of a sweep, like Table 3 of the paper: one row per variant, mean ± std over seeds.

    report = build_report(sweep_dir)          # read plan.json and every run written so far
    print(format_terminal(report))            # aligned plain text
    write_report(report, sweep_dir / "report")  # table.md, table.csv, runs.csv, report.html

Modules: ``collect`` reads the sweep directory, ``table`` aggregates it, ``build`` judges its rows, ``text`` and
``render`` format Markdown and plain text (the verdict view first, every column with ``wide``), ``records`` the CSV,
``badges`` colours a verdict by its kind, ``plots`` (the runs) and ``forest`` (the Δ plot) draw, ``html`` makes the
self-contained page, ``write`` writes files and uploads to W&B.
"""

from ablate.runs.outcome import RunRow
from ablate.report.build import build_report
from ablate.report.table import Curve, Report, Stat, VariantRow
from ablate.report.render import format_markdown, format_terminal
from ablate.report.write import upload_table, write_report

__all__ = [
    "Curve",
    "Report",
    "RunRow",
    "Stat",
    "VariantRow",
    "build_report",
    "format_markdown",
    "format_terminal",
    "upload_table",
    "write_report",
]
