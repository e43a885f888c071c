"""``report.html``: one self-contained page (inline CSS and SVG; no script, no link, no font to fetch).

Verdict first: a title (sweep, metric, goal, date) and the note on missing and failed runs, then the Δ forest plot
beside the verdict view (each row's headline metric, Δ, interval and verdict as a coloured badge); under it, folded,
what the numbers mean and every column; then the plots of the runs, every failure's message and the run list.
The page fits a window 1000 px wide: only a folded wide table scrolls, inside its own box.
"""

from __future__ import annotations

from html import escape

from ablate.report import badges, plots
from ablate.report.columns import verdict_titles
from ablate.report.effects import effect_cells, effect_headers, findings, trend_cells, trend_headers
from ablate.report.records import run_columns, run_records
from ablate.report.forest import deltas_svg
from ablate.report.render import blocks, missing_note, view
from ablate.report.table import Report
from ablate.report.text import (
    design_note,
    legend,
    notes,
    precision_note,
    fused_note,
    status_note,
)
from ablate.report.cells import format_value
from ablate.report.cost import cost_note
from ablate.runs.status import Status
from ablate.stats.design import MINIMIZE

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 1400px; margin: 2em auto; padding: 0 1em; }
h1 { margin-bottom: 0.1em; } .meta { color: #555; margin-top: 0; } code { overflow-wrap: anywhere; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: 0.5em 0.8em; }
.note.ok { background: #eef7ee; border-color: #3a9a3a; }
table { border-collapse: collapse; margin: 0.8em 0; font-variant-numeric: tabular-nums; }
th, td { padding: 0.3em 0.55em; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td.text, th.text { text-align: left; }
table.wide td:last-child { white-space: normal; min-width: 12em; max-width: 24em; color: #a00; font-size: 0.9em; }
table.verdicts td:last-child { white-space: normal; }
tr.base td { font-weight: 600; background: #f3f6fb; }
tr.pending td, tr.failed td { color: #888; font-style: italic; }
.verdict-view { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 0.5em 2em; }
.verdict-view > figure { flex: 1 1 560px; max-width: 720px; } .verdict-view > .tables { flex: 0 1 auto; min-width: 0; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5em; } figure { margin: 0; min-width: 0; }
figure svg { max-width: 100%; height: auto; } figcaption { color: #555; font-size: 0.9em; }
.scroll { overflow-x: auto; max-width: 100%; } .legend { color: #555; font-size: 0.9em; }
details { margin-top: 1em; } summary { cursor: pointer; font-weight: 600; }
"""
CSS += badges.badge_css()


def _table(table_id: str, headers: list[str], rows: list[tuple[str, list[str]]], text_cols: set[int],
           css: str = "", badge: set[int] = frozenset()) -> str:
    """An HTML table; ``rows`` are (row class, cells); columns in ``text_cols`` are left-aligned; the columns in
    ``badge`` hold verdicts, each shown as a badge in its kind's colour."""

    def cls(i: int, extra: str = "") -> str:
        names = " ".join(n for n in ("text" if i in text_cols else "", extra) if n)
        return f' class="{names}"' if names else ""

    def cell(i: int, text: str) -> str:
        if i in badge and badges.kind(text):
            return f'<span class="badge {badges.css_class(text)}">{escape(text)}</span>'
        return escape(text)

    head = "".join(f"<th{cls(i)}>{escape(h)}</th>" for i, h in enumerate(headers))
    body = "\n".join(
        f'<tr class="{row_cls}">' + "".join(f"<td{cls(i)}>{cell(i, c)}</td>" for i, c in enumerate(cells)) + "</tr>"
        for row_cls, cells in rows)
    css_attr = f' class="{css}"' if css else ""
    return (f'<table id="{table_id}"{css_attr}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n'
            "</table>")


def variant_table(report: Report, *, wide: bool) -> str:
    """The comparison table, one row per variant (a table per stratum), as the verdict view (a badge per verdict;
    table ``verdicts``) or with every column (``wide``; table ``variants``); the base row and pending rows are
    styled."""
    out = []
    for i, (stratum, variants) in enumerate(blocks(report)):
        headers, cells, left = view(report, variants, wide=wide)
        rows = [(" ".join(filter(None, ("base" if row.is_base else "", row.status))), c)
                for row, c in zip(variants, cells)]
        name = "variants" if wide else "verdicts"
        title = f"<h3>{escape(stratum)}</h3>\n" if stratum else ""
        out.append(title + _table(name if i == 0 else f"{name}-{i}", headers, rows, text_cols=left,
                                  css="wide" if wide else "verdicts",
                                  badge={i for i, title in enumerate(headers) if title in verdict_titles(report)}))
    return "\n".join(out)


def effects_tables(report: Report) -> str:
    """A two-factor design's effects and a ladder's trends, when the design has them."""
    out = []
    if report.effects:
        rows = [("", effect_cells(report, e)) for e in report.effects]
        out += ["<h2>Effects</h2>",
                f'<div class="scroll">{_table("effects", effect_headers(report), rows, {0, 1, 5})}</div>',
                *(f"<p>{escape(line)}</p>" for line in findings(report))]
    if report.trends:
        headers = trend_headers(report)
        rows = [("", trend_cells(report, t)) for t in report.trends]
        out += ["<h2>Across sizes</h2>",
                f'<div class="scroll">{_table("trends", headers, rows, {0, len(headers) - 1})}</div>',
                figure("trend", plots.trends_svg(report), "(d) Each row's Δ against the base row at each size, error "
                       f"bars: its simultaneous interval ({report.design.describe()})")]
    return "\n".join(out)


def run_table(report: Report) -> str:
    """Every planned run, in plan order, with its status and raw numbers."""
    headers = run_columns(report)
    status = headers.index("status")
    rows = [(record[status], [format_value(float(f"{v:.6g}") if isinstance(v, float) else v) for v in record])
            for record in run_records(report)]
    return _table("runs", headers, rows, text_cols={0, 1, len(headers) - 2, len(headers) - 1})


def failures(report: Report) -> str:
    """A list of the failed runs with their full error message, or nothing."""
    items = [f"<li><code>{escape(run.id)}</code> ({escape(run.variant)}, seed {escape(format_value(run.seed))}): "
             f"<span class=\"error\">{escape(run.error or '(no message)')}</span></li>"
             for run in report.runs if run.status == Status.FAILED]
    return f"<h2>Failures</h2>\n<ul>{''.join(items)}</ul>" if items else ""


def header(report: Report) -> str:
    """Title, metric and goal, date, and the note on missing and failed runs."""
    counts = report.status_counts()
    complete = counts.get(Status.FINISHED, 0) == len(report.runs)
    note = status_note(report) + ("" if complete else " Variants without a finished run show their status "
                                  "instead of numbers; the others average the seeds that finished.")
    better = "lower" if report.goal == MINIMIZE else "higher"
    return (f"<h1>{escape(report.name)}</h1>\n"
            f'<p class="meta">Headline metric <code>{escape(report.metric)}</code>, goal: {escape(report.goal)} '
            f"({better} is better)"
            + "".join(f"; also judged <code>{escape(j.name)}</code>, goal: {escape(j.goal)}"
                      for j in report.also_judged)
            + f" · base variant <code>{escape(report.base_variant)}</code> · {escape(report.date)}"
            f" · <code>{escape(str(report.sweep_dir))}</code></p>\n"
            f'<p class="meta">Comparisons: {escape(design_note(report))}</p>\n'
            f'<p class="note{" ok" if complete else ""}">{escape(note)}</p>')


def figure(fig_id: str, svg: str, caption: str) -> str:
    return f'<figure id="{fig_id}">\n{svg}\n<figcaption>{escape(caption)}</figcaption>\n</figure>'


def render_html(report: Report) -> str:
    """The whole page as a string; it needs nothing but itself to display.

    Args:
        report: from :func:`ablate.report.build_report`.

    Returns:
        An HTML5 document with the table and the plots as inline SVG.
    """
    title = f"{report.name}: {report.heading}"
    curves = figure("curves", plots.curves_svg(report),
                    f"(a) Validation {report.metric} of every variant, mean over seeds with a min–max band.")
    finals = figure("finals", plots.finals_svg(report),
                    f"(b) Final {report.metric} per variant, error bars: std over seeds; base highlighted.")
    deltas = figure("deltas", deltas_svg(report),
                    "Each variant minus the base, bars: its simultaneous interval; dotted: the margin; "
                    f"{badges.caption()}.")
    deltas += "".join(f"\n{figure(f'deltas-{i}', deltas_svg(report, j), f'The same on {j.name}.')}"
                      for i, j in enumerate(report.also_judged, start=1))  # a forest plot per judged metric
    verdicts = (f'<section class="verdict-view">\n{deltas}\n<div class="tables">{variant_table(report, wide=False)}'
                "</div>\n</section>")
    definitions = (f'<details id="definitions"><summary>What the numbers mean</summary>\n'
                   f'<p class="legend">{escape(legend(report))}</p>\n</details>')
    every = (f'<details id="every-column"><summary>Every column</summary>\n'
             f'<div class="scroll">{variant_table(report, wide=True)}</div>\n</details>')
    runs = (f"<details><summary>All runs ({len(report.runs)})</summary>\n"
            f'<div class="scroll">{run_table(report)}</div>\n</details>')
    body = [header(report), "<h2>Verdicts</h2>", verdicts,
            *(f'<p class="note">{escape(line)}</p>'
              for line in [*missing_note(report), *precision_note(report), *fused_note(report), *notes(report),
                           *cost_note(report)]),
            definitions, every, effects_tables(report), "<h2>Runs</h2>",
            f'<section class="plots">\n{curves}\n{finals}\n</section>', failures(report), runs]
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(filter(None, body)) + "\n</body>\n</html>\n")
