"""Comparison reports of a sweep, like Table 3 of the paper: one row per variant, mean ± std over seeds.

    report = build_report(sweep_dir)          # read plan.json and every run written so far
    print(format_terminal(report))            # aligned plain text
    write_report(report, sweep_dir / "report")  # table.md, table.csv, runs.csv, report.html

Modules: ``collect`` reads the sweep directory, ``table`` aggregates it, ``text`` formats Markdown,
plain text and CSV, ``plots`` and ``html`` make the self-contained page, ``write`` writes files and
uploads to W&B.
"""

from ablate.report.collect import RunRow
from ablate.report.table import Curve, Report, Stat, VariantRow, build_report
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
