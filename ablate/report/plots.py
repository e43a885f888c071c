"""The report's plots of the runs, rendered by matplotlib as SVG text to inline in a self-contained page.

Figures are built with ``matplotlib.figure.Figure`` (no pyplot, no global backend state) and
saved as SVG with text kept as ``<text>`` elements, so titles are searchable in the page. The Δ forest plot, the
figure of the verdicts, is :mod:`ablate.report.forest`.
"""

from __future__ import annotations

import io
import re

from matplotlib import rc_context
from matplotlib.figure import Figure

from ablate.report.table import Report, VariantRow
from ablate.stats.design import MINIMIZE

BASE_COLOR = "black"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
CURVES_TITLE = "{metric} vs step (mean over seeds, band: min–max)"
FINALS_TITLE = "final {metric} per variant (mean ± std over seeds)"


def colors(report: Report) -> dict[str, str]:
    """One color per variant, the same in both plots; the base variant is black."""
    others = [v.name for v in report.variants if not v.is_base]
    mapping = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(others)}
    return {v.name: mapping.get(v.name, BASE_COLOR) for v in report.variants}


def to_svg(fig: Figure, salt: str) -> str:
    """The figure as an ``<svg>`` element: no XML prolog, no date, ids unique per figure."""
    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[re.search(r"<svg\b", text).start():].strip()


def _placeholder(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="gray")


def curves_svg(report: Report) -> str:
    """(a) The headline metric against step, every variant overlaid: mean line, min–max band.

    Args:
        report: the sweep's report; variants without logged points are left out.

    Returns:
        An ``<svg>`` element.
    """
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    palette = colors(report)
    drawn = [v for v in report.variants if v.curve is not None]
    for row in drawn:
        c = row.curve
        label = _label(row, sep=" ")
        ax.plot(c.steps, c.mean, color=palette[row.name], lw=2.4 if row.is_base else 1.6, label=label,
                marker="o" if len(c.steps) < 3 else None, zorder=3 if row.is_base else 2)
        ax.fill_between(c.steps, c.lo, c.hi, color=palette[row.name], alpha=0.18, lw=0)
    if drawn:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=9)
    else:
        _placeholder(ax, "no validation points logged yet")
    ax.set(xlabel="step", ylabel=report.metric, title=CURVES_TITLE.format(metric=report.metric))
    ax.grid(alpha=0.3)
    return to_svg(fig, salt=f"{report.name}-curves")


def finals_svg(report: Report) -> str:
    """(b) The final headline metric of each variant with std error bars; the base is highlighted.

    Args:
        report: the sweep's report; a variant with no finished run keeps its place, with no point.

    Returns:
        An ``<svg>`` element.
    """
    fig = Figure(figsize=(max(5.0, 1.1 * len(report.variants) + 2), 4.2))
    ax = fig.add_subplot()
    palette = colors(report)
    for x, row in enumerate(report.variants):
        stat = row.metrics[report.metric]
        if stat is None:
            continue
        ax.errorbar([x], [stat.mean], yerr=[stat.std or 0.0], fmt="D" if row.is_base else "o",
                    ms=9 if row.is_base else 7, color=palette[row.name], capsize=5, elinewidth=1.5)
        if row.is_base:
            ax.axhline(stat.mean, color=BASE_COLOR, ls="--", lw=1, alpha=0.6, label=f"base mean {stat.mean:.4g}")
    ax.set_xticks(range(len(report.variants)), [_label(row) for row in report.variants])
    ax.set_xlim(-0.6, len(report.variants) - 0.4)
    if report.base is None or report.base.metrics[report.metric] is None:
        _placeholder(ax, "" if any(v.metrics[report.metric] for v in report.variants) else "no finished runs yet")
    else:
        ax.legend(frameon=False, fontsize=9)
    better = "lower" if report.goal == MINIMIZE else "higher"
    ax.set(ylabel=f"{report.metric} ({better} is better)", title=FINALS_TITLE.format(metric=report.metric))
    ax.grid(axis="y", alpha=0.3)
    return to_svg(fig, salt=f"{report.name}-finals")


def _label(row: VariantRow, sep: str = "\n") -> str:
    """A variant's name, marked ``(base)``, with its count of finished runs when some are missing."""
    name = f"{row.name}{sep}(base)" if row.is_base and row.name != "base" else row.name
    return name if row.n_finished == row.n_runs else f"{name}{sep}({row.n_finished}/{row.n_runs} finished)"


TRENDS_TITLE = "Δ {metric} against the base row at each size, {interval}"


def trends_svg(report: Report) -> str:
    """(d) A ladder: each row's Δ against the base row at each size (the base's parameter count, log scale), with
    its simultaneous interval as error bars, one line per row; the trend verdict in the legend.

    Returns:
        An ``<svg>`` element.
    """
    from ablate.report.cells import interval_header

    fig = Figure(figsize=(7.5, 4.4))
    ax = fig.add_subplot()
    for i, trend in enumerate(report.trends):
        points = [(size, row.comparison) for _, size, row in trend.steps
                  if size and row is not None and row.comparison is not None and row.comparison.diff is not None]
        if not points:
            continue
        color = PALETTE[i % len(PALETTE)]
        xs = [size * (1 + 0.02 * (i - len(report.trends) / 2)) for size, _ in points]  # dodged, not hidden
        ys = [c.diff for _, c in points]
        err = [[c.diff - c.interval[0] if c.interval else 0.0 for _, c in points],
               [c.interval[1] - c.diff if c.interval else 0.0 for _, c in points]]
        ax.errorbar(xs, ys, yerr=err, fmt="-o", color=color, capsize=4, elinewidth=1.4, ms=5,
                    label=f"{trend.row}: {trend.verdict}")
    ax.axhline(0.0, color=BASE_COLOR, lw=1, ls="--", alpha=0.7)
    ax.set_xscale("log")
    if any(ax.get_legend_handles_labels()[1]):
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=9)
    else:
        _placeholder(ax, "no row compared at any size yet")
    better = "lower" if report.goal == MINIMIZE else "higher"
    ax.set(xlabel="parameters of the base row (log scale)", ylabel=f"Δ {report.metric} ({better} is better)",
           title=TRENDS_TITLE.format(metric=report.metric, interval=interval_header(report)))
    ax.grid(alpha=0.3)
    return to_svg(fig, salt=f"{report.name}-trends")
