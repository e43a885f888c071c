"""The report's factorial sections as cells and sentences: a two-factor design's effects, a ladder's trends.

Each effect is one contrast of the family (:mod:`ablate.stats.factorial`) with its own interval at the same share
of the error as every row of the table, so its verdict reads like a row's: better / worse (the interval excludes
0), equivalent (inside the margin), undecided (|Δ| < x). An interaction's verdict says whether the effect of one
factor depends on the other.
"""

from __future__ import annotations

from ablate.report import bounds
from ablate.stats.factorial import INTERACTION, WITHIN
from ablate.report.table import Effect, Report, Trend
from ablate.report.cells import FORMATS, NUMBER, format_count, label, pairs_text
from ablate.runs.status import Status
from ablate.stats.compare import Comparison
from ablate.stats.verdict import EQUIVALENT, SIGNED, UNDECIDED, interaction, said


def interval_cell(c: Comparison | None, spec: str) -> str:
    return bounds.interval(*c.interval, spec, c.margin) if c is not None and c.interval else "—"


def delta_cell(c: Comparison | None, spec: str) -> str:
    """Δ signed, on its side of 0 and of ±the margin as the interval's bounds are (:func:`bounds.signed`)."""
    return "—" if c is None or c.diff is None else bounds.signed(c.diff, spec, c.margin)


def p_cell(c: Comparison | None) -> str:
    if c is None or c.p is None:
        return "—"
    return f"{c.p:.3f}" if c.p >= 0.001 else "<0.001"


def verdict_cell(effect: Effect, spec: str) -> str:
    """An effect's verdict; an interaction's as whether the effect depends on the other factor."""
    c = effect.comparison
    if c is None:
        return Status.PENDING  # until every cell has an ended run
    if effect.contrast.kind == INTERACTION and \
            (said_of := interaction(c.verdict, "" if c.margin is None else f"{c.margin:{spec}}", c.detail)):
        return said_of
    text = c.statement
    if said(c.verdict, UNDECIDED) and c.resolved is not None:
        text += f" (|Δ| < {bounds.at_least(c.resolved, spec, bounds.lines(c.margin))})"
    return text + (" (interim)" if c.interim else "")


def effect_headers(report: Report) -> list[str]:
    extra = ["decided at"] if report.design.sequential else []
    return ["effect", "kind", f"Δ {label(report.metric)}", f"{1 - report.design.alpha:.0%} CI (simult.)",
            "p (adj.)", "verdict", "pairs", *extra]


def effect_cells(report: Report, effect: Effect) -> list[str]:
    spec = FORMATS.get(report.metric, NUMBER)
    c = effect.comparison
    cells = [effect.contrast.label, effect.contrast.kind, delta_cell(c, spec),
             interval_cell(c, spec), p_cell(c), verdict_cell(effect, spec), "" if c is None else pairs_text(c)]
    if report.design.sequential:
        cells.append("" if c is None or c.decided_at is None else f"{c.decided_at} seeds")
    return cells


def findings(report: Report) -> list[str]:
    """One sentence per interaction: the effect of the second factor at each level of the first, the interaction with
    its interval, and what it says, plainly either way."""
    spec = FORMATS.get(report.metric, NUMBER)
    within = {e.contrast.levels: e for e in report.effects if e.contrast.kind == WITHIN}
    out = []
    for e in (e for e in report.effects if e.contrast.kind == INTERACTION):
        a_level, b_level, a_reference = e.contrast.levels
        parts = ", ".join(f"{_delta(within.get((b_level, level)), spec)} at {level}"
                          for level in (a_reference, a_level))
        c = e.comparison
        if c is None or c.diff is None:
            out.append(f"{b_level}: {parts}; interaction with {a_level}: not yet measured.")
            continue
        if said(c.verdict, *SIGNED):
            says = "its effect depends on it"
        elif said(c.verdict, EQUIVALENT):
            says = f"its effect does not depend on it by more than ±{c.margin:{spec}}" + \
                (", though it does depend on it a little (the interval excludes 0)" if c.detail else "")
        else:
            says = "undecided whether its effect depends on it"
        out.append(f"{b_level}: {parts}; interaction with {a_level} {delta_cell(c, spec)} {interval_cell(c, spec)}: "
                   f"{says}.")
    return out


def _delta(effect: Effect | None, spec: str) -> str:
    c = effect.comparison if effect is not None else None
    return "—" if c is None or c.diff is None else f"{delta_cell(c, spec)} ({verdict_cell(effect, spec)})"


def trend_headers(report: Report) -> list[str]:
    if not report.trends:
        return []
    steps = [f"Δ at {step} ({format_count(size)} params)" for step, size, _ in report.trends[0].steps]
    return ["row", *steps, "Δ per doubling", f"{1 - report.design.alpha:.0%} CI (simult.)", "trend"]


def trend_cells(report: Report, trend: Trend) -> list[str]:
    spec = FORMATS.get(report.metric, NUMBER)
    steps = []
    for _, _, row in trend.steps:
        c = row.comparison if row is not None else None
        steps.append("—" if c is None or c.diff is None else
                     f"{delta_cell(c, spec)} {interval_cell(c, spec)} {c.statement}")
    slope = trend.slope
    return [trend.row, *steps, delta_cell(slope, spec),
            interval_cell(slope, spec), trend.verdict]
