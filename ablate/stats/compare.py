"""The rows of a report against its base: values by seed in, one :class:`Comparison` per row out.

Each row's outcomes map a seed to its final value, or NaN for a run that failed (an exception, a NaN or infinite
loss); runs still going are not outcomes yet. Pairing uses the seeds both sides ended ("paired on 4 of 5 seeds");
with fewer than two such pairs it falls back to Welch's unpaired interval, and says so. A sequential design judges
only its complete looks: the first n seeds ended for the row and the base.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ablate.stats import planning, skew
from ablate.stats import verdict as V
from ablate.stats.boundaries import critical_values
from ablate.stats.design import MINIMIZE, Design
from ablate.stats.judge import Judgement, judge_paired, judge_unpaired

Outcomes = dict[int, float]  # seed -> final value; NaN: the run failed


@dataclass(frozen=True)
class Comparison:
    """One row against the base at its reported look (see :mod:`ablate.stats.judge`)."""

    verdict: str
    diff: float | None  # Δ = row - base, from the values the interval uses
    interval: tuple[float, float] | None
    level: float | None  # the interval's own confidence (1 - the error its row spent on values)
    p: float | None  # the smallest family error at which the interval would exclude 0 (adjusted p-value)
    paired: bool
    n: int  # pairs (paired), or the row's finished runs
    m: int  # pairs (paired), or the base's finished runs
    shared: int  # seeds both sides ended (paired), of ``ended`` the row ended
    ended: int
    better: str | None  # "k/n seeds better" (paired) or the probability of improvement (unpaired)
    failed: tuple[int, int, int, int]  # row failed, row runs, base failed, base runs (at the look)
    failure_p: float | None
    on_failures: bool  # the verdict comes from the failure counts
    decided_at: int | None  # seeds at the look that decided the row (sequential designs)
    look: int  # seeds at the reported look
    margin: float | None  # in the metric's units
    detectable: float | None  # smallest |Δ| found with 80% power at this look (sd at its 90% upper bound)
    seeds_for_margin: tuple[int | None, int | None] | None  # undecided rows: a fixed design's seeds (sd, its bound)
    interim: bool  # runs of the row or the base are still going
    reason: str = ""  # why a row is untested or undecided when the interval alone does not say
    detail: str = ""  # what the interval proves beyond the verdict's name (:func:`ablate.stats.verdict.qualifier`)
    skew: float | None = None  # the per-seed differences' sample skewness G1 (paired, 3 pairs or more)
    skewed: bool = False  # G1 beyond what normal differences reach in 1% of sweeps (:mod:`ablate.stats.skew`)
    sign_flip_p: float | None = None  # the exact sign-flip test's p (Bonferroni-adjusted; paired, small n)
    step: int | None = None  # compared at this step, not at the runs' ends (some runs were stopped early)

    @property
    def statement(self) -> str:
        """The verdict as every format prints it: its name, and what else the interval proves."""
        return f"{self.verdict} ({self.detail})" if self.detail else self.verdict

    @property
    def resolved(self) -> float | None:
        """The margin the seeds resolved: every Δ the interval allows is within ±this."""
        return None if self.interval is None else max(abs(self.interval[0]), abs(self.interval[1]))


def _scalar(j: Judgement, name: str) -> float:
    return float(getattr(j, name)[0])


def _adjusted_p(j: Judgement, design: Design) -> float | None:
    """The smallest family error at which the reported interval would exclude 0 (Bonferroni- and look-adjusted)."""
    if math.isnan(_scalar(j, "lo")):
        return None
    t, df, spent = abs(_scalar(j, "diff") / _scalar(j, "se")), _scalar(j, "df"), _scalar(j, "spent")
    history = j.history[0]
    if len(history) <= 1:  # one look: the t-test's p scaled by the row's share of the error
        return min(1.0, 2 * float(stats.t.sf(t, df)) * design.alpha / spent)
    counts, budget = zip(*history)

    def excludes(alpha: float) -> bool:
        return t > critical_values(counts, tuple(b * alpha / design.alpha for b in budget))[-1]

    if not excludes(1.0):
        return 1.0
    lo, hi = 1e-12, 1.0
    if excludes(lo):
        return lo
    while hi / lo > 1.0001:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if excludes(mid) else (mid, hi)
    return hi


def _better(x: np.ndarray, y: np.ndarray, paired: bool, goal: str) -> str | None:
    if paired:
        both = np.isfinite(x) & np.isfinite(y)
        x, y = x[both], y[both]
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if min(len(x), len(y)) < 2:
        return None
    sign = -1.0 if goal == MINIMIZE else 1.0
    if paired:
        return f"{int(np.sum(sign * (x - y) > 0))}/{len(x)}"
    wins = np.sum(sign * (x[:, None] - y[None, :]) > 0) + 0.5 * np.sum(x[:, None] == y[None, :])
    return f"{wins / (len(x) * len(y)):.2f}"


def _reason(j: Judgement, paired: bool, code: int) -> str:
    rf, runs, bf, base_runs = (int(_scalar(j, k)) for k in ("row_failed", "runs", "base_failed", "base_runs"))
    counts = f"{rf}/{runs} failed vs the base's {bf}/{base_runs}"
    if bool(j.on_failures[0]):
        return f"{counts} (Fisher's exact p = {_scalar(j, 'failure_p'):.2g})"
    if code == V.TOO_FEW:
        n, m = int(_scalar(j, "n")), int(_scalar(j, "m"))
        return f"{n} pairs with values" if paired else f"{n} vs {m} runs with values"
    if code == V.CANNOT_TEST:
        return "every seed moved by the same amount: no spread to test against" if paired else \
            "no spread in either row's values: nothing to test against"
    if rf * base_runs > bf * runs:
        return counts + (": its survivors are its luckier seeds, so they can show it worse or not better, never "
                         "better, equivalent or not worse")
    if rf * base_runs < bf * runs:
        return counts + (": the base's survivors are its luckier seeds, so against them the row can be shown better "
                         "or not worse, never worse, equivalent or not better")
    return ""


def compare(row: Outcomes, base: Outcomes, design: Design, goal: str, *, interim: bool = False,
            reference: Outcomes | None = None) -> Comparison:
    """One row's outcomes against the base's (see the module docstring). A relative margin is a percentage of the
    mean of ``reference`` (the base by default) over the seeds the reported look used."""
    reference = base if reference is None else reference
    shared = sorted(set(row) & set(base))
    pairs = [s for s in shared if math.isfinite(row[s]) and math.isfinite(base[s])]
    if design.sequential:
        seeds = design.seeds(design.max_seeds)
        complete = next((n for n in range(len(seeds), -1, -1) if set(seeds[:n]) <= set(shared)), 0)
        paired, order = True, seeds[:complete]
    else:
        paired, order = len(pairs) >= 2, shared
    if paired:
        x, y = np.array([[row[s] for s in order]]), np.array([[base[s] for s in order]])
        j = judge_paired(x, y, design, goal, np.array([[reference.get(s, math.nan) for s in order]]))
        look = int(j.look[0])
        x, y = x[:, :look], y[:, :look]
    else:
        x, y = np.array([list(row.values())]), np.array([list(base.values())])
        j = judge_unpaired(x, y, design, goal, np.array([list(reference.values())]))
    code = int(j.verdict[0])
    tested = not math.isnan(_scalar(j, "lo"))
    margin = None if math.isnan(_scalar(j, "margin")) else _scalar(j, "margin")
    shape = skew.check((x - y)[0], design.rows) if paired else skew.Check()
    return Comparison(
        verdict=V.name(code), diff=None if math.isnan(_scalar(j, "diff")) else _scalar(j, "diff"),
        interval=(_scalar(j, "lo"), _scalar(j, "hi")) if tested else None,
        level=1 - _scalar(j, "spent") if tested else None, p=_adjusted_p(j, design), paired=paired,
        n=int(_scalar(j, "n")), m=int(_scalar(j, "m")), shared=len(shared), ended=len(row),
        better=_better(x[0], y[0], paired, goal),
        failed=tuple(int(_scalar(j, k)) for k in ("row_failed", "runs", "base_failed", "base_runs")),
        failure_p=None if math.isnan(_scalar(j, "failure_p")) else _scalar(j, "failure_p"),
        on_failures=bool(j.on_failures[0]), decided_at=int(j.decided_at[0]) or None, look=int(_scalar(j, "look")),
        margin=margin, detectable=_detectable(j) if tested else None,
        seeds_for_margin=_seeds_for_margin(j, margin, design) if tested and margin and code not in V.DECIDED else None,
        interim=interim and not (design.sequential and j.decided_at[0]), reason=_reason(j, paired, code),
        detail=V.qualifier(code, _scalar(j, "lo"), _scalar(j, "hi"), goal) if tested else "",
        skew=shape.g1, skewed=shape.skewed, sign_flip_p=shape.sign_flip_p)


def _detectable(j: Judgement) -> float | None:
    value = planning.detectable(_scalar(j, "se"), _scalar(j, "df"), _scalar(j, "crit"))
    return None if math.isnan(value) else value


def _seeds_for_margin(j: Judgement, margin: float, design: Design) -> tuple[int | None, int | None]:
    """A fixed design's seeds for the margin, with the per-seed sd of Δ as observed and at its upper bound."""
    sd = _scalar(j, "se") * math.sqrt(min(_scalar(j, "n"), _scalar(j, "m")))
    upper = planning.sd_upper(sd, _scalar(j, "df"))
    return (planning.seeds_for_margin(sd, margin, design.row_alpha),
            planning.seeds_for_margin(upper, margin, design.row_alpha))
