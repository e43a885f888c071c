"""The whole report as a document: Markdown (table.md) and aligned plain text (the terminal).

Both lead with the verdict view (the columns of :mod:`ablate.report.columns` with a place in it: each row's headline
metric, Δ, interval and verdict), one block per stratum (the rows compared with the base row at the same values of the
other factors). Every column comes after it in Markdown (folded), and in the terminal with ``wide`` (``ablate report
--wide``); then a two-factor design's effects with a sentence per interaction, then a ladder's trends.
"""

from __future__ import annotations

import os
import shutil
import textwrap
import unicodedata
from typing import TextIO

from ablate.report import badges
from ablate.report.effects import effect_cells, effect_headers, findings, trend_cells, trend_headers
from ablate.report.table import Report, VariantRow
from ablate.report.cells import interval_header, label, one_line
from ablate.report.columns import displayed, verdict_titles
from ablate.report.cost import cost_note
from ablate.runs.sweep_folder import REPORT_DIR, REPORT_PAGE
from ablate.report.text import design_note, fused_note, legend, notes, precision_note, status_note

WIDTH = 120  # the width printed to off a terminal (a pipe, a log file) unless COLUMNS says otherwise
MIN_WRAP = 16  # the narrowest a wrapped verdict may be beside its row; narrower, it goes on lines under the row
INDENT = "  "  # a wrapped prose line's continuation, and a verdict under its row
WIDE_HINT = f"every column and what the numbers mean: ablate report --wide (or {REPORT_DIR}/{REPORT_PAGE})"


def terminal_width(stream: TextIO) -> int:
    """The columns to print ``stream`` in: ``COLUMNS`` when set, else the terminal's width when ``stream`` is one
    (:func:`shutil.get_terminal_size`), else :data:`WIDTH`."""
    if os.environ.get("COLUMNS") or stream.isatty():
        return max(1, shutil.get_terminal_size((WIDTH, 24)).columns)
    return WIDTH


def drop_order(report: Report) -> list[str]:
    """The verdict view's columns a narrow terminal gives up, first to last, by title (each column's ``drop``): the
    runs, the headline metric's mean ± sd, Δ, then the interval. The variant and its verdict always stay (the verdict
    wraps under itself)."""
    droppable = [c for c in displayed(report, verdict_view=True) if c.drop is not None]
    return [c.title for c in sorted(droppable, key=lambda c: c.drop)]


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


def view(report: Report, rows: list[VariantRow], *, wide: bool) -> tuple[list[str], list[list[str]], set[int]]:
    """The headers, the rows' cells and the left-aligned columns of the verdict view, or of every column (``wide``).

    The verdict view leaves out the failures' column: the failed runs' errors are listed under the table.
    """
    cols = displayed(report, verdict_view=not wide)
    return ([c.title for c in cols], [[c.cell(row) for c in cols] for row in rows],
            {i for i, c in enumerate(cols) if c.left})


def _markdown_tables(report: Report, *, wide: bool) -> list[str]:
    lines = []
    for stratum, rows in blocks(report):
        headers, cells, left = view(report, rows, wide=wide)
        if not wide:
            marked = {i for i, title in enumerate(headers) if title in verdict_titles(report)}
            cells = [[badges.marked(text) if i in marked else text for i, text in enumerate(c)] for c in cells]
        lines += ([f"### {stratum}", ""] if stratum else [])
        lines += _markdown_table(headers, cells, left) + [""]
    return lines


def format_markdown(report: Report) -> str:
    """A Markdown document: title, the verdict view (a block per stratum), every column folded, effects, trends, the
    legend and the status."""
    lines = [f"# {report.name}: {report.heading}", "", f"{report.date} · {status_note(report)}", "",
             f"Comparisons: {design_note(report)}", "", *_markdown_tables(report, wide=False),
             "<details><summary>Every column</summary>", "", *_markdown_tables(report, wide=True), "</details>", ""]
    if report.effects:
        lines += ["## Effects", ""]
        lines += _markdown_table(effect_headers(report), [effect_cells(report, e) for e in report.effects], {0, 1, 5})
        lines += ["", *findings(report), ""]
    if report.trends:
        lines += ["## Across sizes", ""]
        lines += _markdown_table(trend_headers(report), [trend_cells(report, t) for t in report.trends],
                                 {0, len(trend_headers(report)) - 1}) + [""]
    return "\n".join([*lines, *missing_note(report), *precision_note(report), *fused_note(report), *notes(report),
                      legend(report), ""])


def effect_drop_order(report: Report) -> list[str]:
    """The effects table's columns a narrow terminal gives up, first to last: the look that decided it, the pairs,
    the adjusted p, the kind, Δ, then the interval; its verdict goes to the end of the line, to wrap under itself."""
    return ["decided at", "pairs", "p (adj.)", "kind", f"Δ {label(report.metric)}", interval_header(report)]


def _fit_table(headers: list[str], rows: list[list[str]], left: set[int], width: int,
               drop: list[str] | None) -> list[str]:
    """An effects or trends table: every column (``drop`` None), else the columns that fit ``width``, the last one
    wrapped under itself (a trend's columns go in order: the Δ at each size, the slope, then the interval)."""
    if drop is None:
        return _aligned(headers, rows, left)
    last = headers.index("verdict") if "verdict" in headers else len(headers) - 1
    order = [i for i in range(len(headers)) if i != last] + [last]  # the verdict last, so that it wraps
    headers, rows = [headers[i] for i in order], [[r[i] for i in order] for r in rows]
    left = {order.index(i) for i in left}
    return _aligned(*fitted(headers, rows, left, width, drop), fit=width)


def display_width(text: str) -> int:
    """The columns a terminal draws ``text`` in: a wide or full-width character (CJK, most emoji) takes two, a
    combining mark, a zero-width joiner or a variation selector none, any other one (``len`` counts code points)."""
    def columns(ch: str) -> int:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            return 0
        return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1

    return sum(map(columns, text))


def _pad(text: str, width: int, left: bool) -> str:
    """``text`` padded with spaces to ``width`` display columns, on the right (``left``) or on the left."""
    room = " " * max(0, width - display_width(text))
    return text + room if left else room + text


def _widths(headers: list[str], rows: list[list[str]]) -> list[int]:
    return [max(display_width(r[i]) for r in [headers, *rows]) for i in range(len(headers))]


def fitted(headers: list[str], rows: list[list[str]], left: set[int], width: int,
           drop: list[str]) -> tuple[list[str], list[list[str]], set[int]]:
    """The columns that fit ``width``: those titled in ``drop`` go, in its order, while the table is wider than
    ``width`` with its last cell (the verdict) wrapped to :data:`MIN_WRAP` columns."""
    def width_of(keep: list[int]) -> int:
        widths = _widths([headers[i] for i in keep], [[r[i] for i in keep] for r in rows])
        return sum(widths[:-1]) + 2 * (len(widths) - 1) + min(widths[-1], MIN_WRAP)

    keep = list(range(len(headers)))
    for title in drop:
        if width_of(keep) <= width:
            break
        keep = [i for i in keep if headers[i] != title]
    return ([headers[i] for i in keep], [[r[i] for i in keep] for r in rows],
            {j for j, i in enumerate(keep) if i in left})


def _aligned(headers: list[str], rows: list[list[str]], left: set[int], paint: set[int] = frozenset(),
             fit: int | None = None) -> list[str]:
    """Aligned lines: a header, a rule, a row each; the cells of the columns in ``paint`` in their verdict's colour.
    With ``fit``, a row's last cell that would cross that column goes on in continuation lines under itself, or, with
    less than :data:`MIN_WRAP` columns left for it, on lines of its own under the row."""
    widths = _widths(headers, rows)
    start = sum(widths[:-1]) + 2 * (len(widths) - 1)  # where the last column begins
    under = bool(fit) and len(widths) > 1 and fit - start < min(widths[-1], MIN_WRAP)  # too narrow beside its row

    def line(cells: list[str], colour: bool) -> str:
        padded = [_pad(c, w, i in left) for i, (c, w) in enumerate(zip(cells, widths))]
        last = [padded[-1]]
        if under or fit and start + display_width(cells[-1]) > fit:
            room = max(1, fit - len(INDENT) if under else fit - start)
            last = textwrap.wrap(cells[-1], room, break_long_words=False, break_on_hyphens=False) or [""]
        for i in paint if colour else ():  # the escape codes wrap the text, never the padding
            def painted(text: str, verdict: str = cells[i]) -> str:
                return text.replace(text.strip(), badges.ansi(text.strip(), verdict), 1) if text.strip() else text

            if i == len(cells) - 1:
                last = [painted(chunk) for chunk in last]
            else:
                padded[i] = painted(padded[i])
        if under:  # the row's other cells, then the last one on lines of its own under them
            rest = [INDENT + chunk for chunk in last if chunk]
            return "\n".join(["  ".join(padded[:-1]).rstrip(), *rest])
        first = "  ".join([*padded[:-1], last[0]]).rstrip()
        return "\n".join([first, *(" " * start + chunk for chunk in last[1:])])

    rule = ["-" * w for w in widths]
    if fit:  # the last column's rule no longer than the room it wraps to
        rule[-1] = "" if under else rule[-1][:fit - start]
    return [line(headers, False), line(rule, False), *(line(r, True) for r in rows)]


def wants_colour(stream: TextIO) -> bool:
    """Colour the verdicts on a terminal, unless ``NO_COLOR`` is set (https://no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def format_terminal(report: Report, *, wide: bool = False, colour: bool = False, width: int = WIDTH) -> str:
    """The report as aligned plain text, for printing: text columns left, numbers right.

    Args:
        report: from :func:`ablate.report.build_report`.
        wide: every column and the legend, however wide the table; by default the verdict view within ``width``
            columns: the columns of :func:`drop_order` go, in its order, until it fits, and a long verdict goes on
            under itself. Only a token that cannot be broken (a long variant name, a path) makes a line longer.
        colour: each verdict in its colour (ANSI escape codes), for a terminal.
        width: the terminal's columns (:func:`terminal_width`); prose lines are wrapped to it.

    Returns:
        A title line, the table (a stratum's rows under its title), effects and trends when the design has them,
        the notes, the run counts and each failed variant's error; with ``wide``, the legend too.
    """
    def fill(text: str) -> str:
        return textwrap.fill(text, max(width, len(INDENT) + 1), subsequent_indent=INDENT, break_long_words=False,
                             break_on_hyphens=False)

    title = [fill(f"{report.name}: {report.heading}  {report.date}"),
             fill(f"comparisons: {design_note(report)}"), ""]
    grouped = blocks(report)
    headers, cells, left = view(report, [row for _, rows in grouped for row in rows], wide=wide)
    if not wide:
        headers, cells, left = fitted(headers, cells, left, width, drop_order(report))
    verdicts = {i for i, title in enumerate(headers) if title in verdict_titles(report)}
    table = _aligned(headers, cells, left, paint=verdicts if colour else frozenset(), fit=None if wide else width)
    out = title + table[:2]  # one alignment for every block, so the columns line up down the page
    at = 2
    for stratum, rows in grouped:
        out += ([fill(f"[{stratum}]")] if len(grouped) > 1 else []) + table[at:at + len(rows)]
        at += len(rows)
    if report.effects:
        effects = (effect_headers(report), [effect_cells(report, e) for e in report.effects], {0, 1, 5})
        out += ["", "effects:", *_fit_table(*effects, width, None if wide else effect_drop_order(report)),
                *(fill(line) for line in findings(report))]
    if report.trends:
        headers = trend_headers(report)
        trends = (headers, [trend_cells(report, t) for t in report.trends], {0, len(headers) - 1})
        out += ["", fill("across sizes:"), *_fit_table(*trends, width, None if wide else headers[1:-1])]
    prose = [*missing_note(report), *precision_note(report), *fused_note(report), *notes(report), *cost_note(report),
             *([legend(report)] if wide else []),
             status_note(report), *(f"failed in {row.name}: {one_line(row.first_error)}"
                                    for row in report.variants if row.n_failed)]
    out += ["", *(fill(line) for line in [*prose, *([] if wide else [WIDE_HINT])])]
    return "\n".join(out) + "\n"
