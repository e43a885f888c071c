"""(c) The Δ forest plot: each row's difference from the base with its simultaneous interval, coloured by verdict.

The x-axis is linear and cut, not log-like: a row far from the others (``none`` at +1.6 when the rest lie within
±0.2) would squash them into a few pixels around 0, and a symlog axis would keep them visible only by drawing
intervals of equal width at unequal lengths, so that the margin lines and the rows could no longer be compared by eye.
So the axis spans the near rows, 0 and the margin; a far row (its farthest end more than :data:`FAR` times the typical
row's) is drawn up to the axis' edge, ending in an arrow there, with its Δ and interval written beside it.
"""

from __future__ import annotations

import statistics

from matplotlib.figure import Figure

from ablate.report import badges, bounds
from ablate.report.plots import BASE_COLOR, _label, _placeholder, to_svg
from ablate.report.table import Report
from ablate.stats.design import Judged
from ablate.stats.verdict import EQUIVALENT, name
from ablate.stats.design import MINIMIZE

TITLE = "Δ {metric} against the base, {interval} (colour: verdict)"
FAR = 4.0  # a row whose farthest end is beyond FAR times the typical row's (and the margin) is cut
PAD = 0.08  # of the axis' span, on each side


def extent(lo: float, hi: float, diff: float) -> float:
    """How far from 0 a row reaches: the farther end of its interval (or its Δ, without one)."""
    return max(abs(lo), abs(hi), abs(diff))


def axis_limits(spans: list[tuple[float, float, float]], margin: float | None) -> tuple[tuple[float, float], bool]:
    """The x-axis' limits for rows (lo, hi, Δ), and whether it cuts a far row.

    The typical row reaches the lower median of the rows' extents (or the margin, if larger); a row reaching more than
    :data:`FAR` times that is far and left out of the span, unless every row would be.

    Returns:
        ((left, right), cut): the span of 0, ±margin and the near rows' ends, padded by :data:`PAD` on each side.
    """
    extents = [extent(*s) for s in spans]
    typical = max(margin or 0.0, statistics.median_low(extents)) if extents else 0.0
    near = [s for s, e in zip(spans, extents) if e <= FAR * typical] or spans
    ends = [0.0, *([-margin, margin] if margin else []), *(x for lo, hi, _ in near for x in (lo, hi))]
    left, right = min(ends), max(ends)
    pad = PAD * ((right - left) or 1.0)
    return (left - pad, right + pad), len(near) < len(spans)


def deltas_svg(report: Report, metric: Judged | None = None) -> str:
    """(c) Each variant's Δ from the base on ``metric`` (a judged metric; None: the headline) with its simultaneous
    interval, coloured by its verdict's kind (:data:`ablate.report.badges.PALETTE`, as the caption says); the
    metric's margin, when declared, as dotted lines; a row beyond the cut axis ends in an arrow with its numbers. A
    variant without an interval has a point, no bar.

    Returns:
        An ``<svg>`` element.
    """
    from ablate.report.cells import interval_header

    key, goal = (report.metric, report.goal) if metric is None else (metric.name, metric.goal)
    rows = [row for row in report.variants if not row.is_base]
    fig = Figure(figsize=(7.0, max(2.0, 0.42 * len(rows) + 1.3)))
    ax = fig.add_subplot()
    compared = [(row, row.comparison if key == report.metric else row.judged.get(key)) for row in rows]
    drawn = {y: (row, c) for y, (row, c) in enumerate(compared) if c is not None and c.diff is not None}
    spans = {y: ((*c.interval, c.diff) if c.interval else (c.diff, c.diff, c.diff)) for y, (_, c) in drawn.items()}
    margin = next((c.margin for _, c in drawn.values() if c.margin), None)
    (left, right), cut = axis_limits(list(spans.values()), margin)
    for y, (row, c) in drawn.items():
        colour = badges.UNDECIDED_COLOR if row.leaks_labels else badges.color(c.verdict)
        lo, hi, diff = spans[y]
        a, b = max(lo, left), min(hi, right)
        if a < b:
            ax.hlines(y, a, b, color=colour, lw=1.8)
        for end, edge, marker, beyond in ((lo, left, "<", lo < left), (hi, right, ">", hi > right)):
            if beyond:  # an arrow at the axis' edge
                ax.plot([edge], [y], marker=marker, ms=8, color=colour, clip_on=False)
            elif c.interval:  # the interval's cap
                ax.plot([end], [y], marker="|", ms=9, color=colour, mew=1.6)
        if left <= diff <= right:
            ax.plot([diff], [y], "o", ms=6, color=colour)
        if lo < left or hi > right:  # cut: its numbers beside the arrow
            text = f"Δ {bounds.signed(diff, '+.3g', c.margin)}" + \
                (f" {bounds.interval(lo, hi, '+.3g', c.margin)}" if c.interval else "")
            at_right = hi > right
            ax.annotate(text, (right if at_right else left, y), xytext=(-10 if at_right else 10, 7),
                        textcoords="offset points", ha="right" if at_right else "left", fontsize=8, color=colour)
    ax.set_xlim(left, right)
    ax.axvline(0.0, color=BASE_COLOR, lw=1, ls="--", alpha=0.7)
    for x in ((-margin, margin) if margin else ()):
        ax.axvline(x, color=badges.COLORS[name(EQUIVALENT)], lw=1, ls=":", alpha=0.8)
    ax.set_yticks(range(len(rows)), [_label(row, sep=" ") for row in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    if not drawn:
        _placeholder(ax, "no variant to compare with the base yet")
    better = "left" if goal == MINIMIZE else "right"
    ax.set(xlabel=f"Δ {key} (better to the {better})" + ("; axis cut, far rows: ▸ with their numbers" if cut else ""),
           title=TITLE.format(metric=key, interval=interval_header(report)))
    ax.grid(axis="x", alpha=0.3)
    return to_svg(fig, salt=f"{report.name}-deltas" + ("" if key == report.metric else f"-{key}"))
