"""The whole report as a document: Markdown (table.md) and aligned plain text (the terminal).

The variant table comes in one block per stratum (the rows compared with the base row at the same values of the
other factors), then a two-factor design's effects with a sentence per interaction, then a ladder's trends.
"""

from __future__ import annotations

from ablate.report.effects import effect_cells, effect_headers, findings, trend_cells, trend_headers
from ablate.report.table import Report, VariantRow
from ablate.report.text import (design_note, display_cells, display_headers, legend, notes, one_line,
                                precision_note, status_note, text_columns)


def blocks(report: Report) -> list[tuple[str, list[VariantRow]]]:
    """The variants grouped by stratum, in order of appearance; one block titled "" without strata."""
    return [(s, [v for v in report.variants if v.stratum == s]) for s in report.strata]


def missing_note(report: Report) -> list[str]:
    return [f"not compared: no base row at {', '.join(report.missing)} (the sweep did not plan it)"] \
        if report.missing else []


def _markdown_table(headers: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i in left else "---:" for i in range(len(headers))) + "|"]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in rows]


def format_markdown(report: Report) -> str:
    """A Markdown document: title, the table (a block per stratum), effects, trends, the legend and the status."""
    headers, left = display_headers(report), text_columns(report)
    lines = [f"# {report.name}: {report.metric} ({report.goal})", "", f"{report.date} · {status_note(report)}", "",
             f"Comparisons: {design_note(report)}", ""]
    for stratum, rows in blocks(report):
        lines += ([f"### {stratum}", ""] if stratum else [])
        lines += _markdown_table(headers, [display_cells(report, row) for row in rows], left) + [""]
    if report.effects:
        lines += ["## Effects", ""]
        lines += _markdown_table(effect_headers(report), [effect_cells(report, e) for e in report.effects], {0, 1, 5})
        lines += ["", *findings(report), ""]
    if report.trends:
        lines += ["## Across sizes", ""]
        lines += _markdown_table(trend_headers(report), [trend_cells(report, t) for t in report.trends],
                                 {0, len(trend_headers(report)) - 1}) + [""]
    return "\n".join([*lines, *missing_note(report), *precision_note(report), *notes(report), legend(report), ""])


def _aligned(headers: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        padded = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return "  ".join(padded).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *map(line, rows)]


def format_terminal(report: Report) -> str:
    """The report as aligned plain text, for printing: text columns left, numbers right.

    Args:
        report: from :func:`ablate.report.build_report`.

    Returns:
        A title line, the table (a stratum's rows under its title), effects and trends when the design has them,
        the legend, the run counts and each failed variant's error.
    """
    headers, left = display_headers(report), text_columns(report)
    out = [f"{report.name}: {report.metric} ({report.goal})  {report.date}", f"comparisons: {design_note(report)}", ""]
    if len(report.strata) == 1:
        out += _aligned(headers, [display_cells(report, row) for row in report.variants], left)
    else:  # one alignment for every block, so the columns line up down the page
        grouped = blocks(report)
        table = _aligned(headers, [display_cells(report, row) for _, rows in grouped for row in rows], left)
        out += table[:2]
        at = 2
        for stratum, rows in grouped:
            out += [f"[{stratum}]", *table[at:at + len(rows)]]
            at += len(rows)
    if report.effects:
        out += ["", "effects:", *_aligned(effect_headers(report), [effect_cells(report, e) for e in report.effects],
                                          {0, 1, 5}), *findings(report)]
    if report.trends:
        out += ["", "across sizes:", *_aligned(trend_headers(report), [trend_cells(report, t) for t in report.trends],
                                               {0, len(trend_headers(report)) - 1})]
    out += ["", *missing_note(report), *precision_note(report), *notes(report), legend(report), status_note(report)]
    out += [f"failed in {row.name}: {one_line(row.first_error)}" for row in report.variants if row.n_failed]
    return "\n".join(out) + "\n"
