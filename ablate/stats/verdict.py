"""Verdicts, read off a row's interval of Δ = row - base (vectorised: one verdict per simulated sweep or one row).

In terms of the improvement I (-Δ when the goal is to minimize, Δ to maximize) with interval [lo, hi] and margin m:

    equivalent   -m < lo and hi < m            (every value the interval allows is smaller than the margin)
    better       lo > 0
    worse        hi < 0
    not worse    lo > -m                       (non-inferior: worse by less than the margin, if at all)
    not better   hi < m
    undecided    otherwise

checked in that order; without a margin only better / worse / undecided. Every verdict is a statement about Δ that
the interval proves, so they are wrong together no more often than the intervals fail to cover.

Failed runs are outcomes (:func:`guard`): the side that fails more often is judged on its survivors, its luckier
seeds, which flatter it. Its survivors still bound it from the other side: a row that fails more often and whose
survivors are worse than the base is worse (the failed seeds could only have made it worse still), and it can be *not
better*; it is never *better*, *equivalent* or *not worse* on its survivors. So the guard drops the interval's bound
on that side alone and reads the verdict off what remains: everything the interval proves that the failures cannot
overturn is kept. An exact test on the failure counts can also call a row worse (or better) on that ground alone.

Every later change of a verdict is one rule below, applied where its fact is known, and named here:

    rule                    when                                                    verdict
    :func:`untested`        no interval: fewer than two values on a side       too few seeds
                            no interval: two or more, but no spread to test    cannot test
    :func:`on_failures`     the exact test on the failure counts rejects       worse (the row fails more), else better
    :func:`no_common_step`  runs were stopped early and share no logged step   cannot test
    :func:`leaking`         the row's mask leaks labels                        not comparable
    :func:`interaction`     an interaction contrast: better or worse           the effect depends on the other factor
                            an interaction contrast: equivalent                no interaction beyond ±m
    :func:`trend`           a ladder's row across its sizes                    flips sign, grows, shrinks, consistent

No other module assigns a verdict word (tests/stats/test_verdict_rules.py checks it).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ablate.stats.design import MINIMIZE

BETTER, WORSE, EQUIVALENT, NOT_WORSE, NOT_BETTER, UNDECIDED, CANNOT_TEST, TOO_FEW = range(8)
NAMES = ("better", "worse", "equivalent", "not worse", "not better", "undecided", "cannot test", "too few seeds")
DECIDED = (BETTER, WORSE, EQUIVALENT)  # a sequential design stops adding seeds to a row with one of these
SIGNED = (BETTER, WORSE)  # the verdicts that prove the sign of Δ: the interval excludes 0
NOT_COMPARABLE = "not comparable"  # the kind of :data:`LEAKS`, coloured as the verdicts that decide nothing
LEAKS = f"{NOT_COMPARABLE}: its mask leaks labels"
GROWS, SHRINKS, FLIPS = "grows", "shrinks", "flips sign"  # a ladder row's trend (:func:`trend`)
CONSISTENT = "consistent: {} at every size"
DEPENDS = "interaction: the effect depends on the other factor"
NO_INTERACTION = "no interaction beyond ±{margin}"


def from_interval(lo: np.ndarray, hi: np.ndarray, goal: str, margin: float | np.ndarray | None) -> np.ndarray:
    """The verdict codes of intervals [lo, hi] of Δ (arrays of one shape), for the goal and the margin (None or
    NaN: no margin, so no verdict that needs one)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    ilo, ihi = (-hi, -lo) if goal == MINIMIZE else (lo, hi)
    m = np.nan if margin is None else np.asarray(margin, float)  # every comparison with NaN is False
    conditions = [(ilo > -m) & (ihi < m), ilo > 0, ihi < 0, ilo > -m, ihi < m]
    return np.select(conditions, [EQUIVALENT, BETTER, WORSE, NOT_WORSE, NOT_BETTER], UNDECIDED)


def guard(lo: np.ndarray, hi: np.ndarray, goal: str, margin: float | np.ndarray | None, row_failed: np.ndarray,
          row_runs: np.ndarray, base_failed: np.ndarray, base_runs: np.ndarray) -> np.ndarray:
    """The verdict codes of intervals [lo, hi] of Δ once the failures had their say (see the module docstring).

    Args:
        lo, hi, goal, margin: as for :func:`from_interval`.
        row_failed, row_runs: the row's failed runs and its runs that ended (failed or finished), at the look.
        base_failed, base_runs: the same for the base.

    Returns:
        :func:`from_interval`'s codes, where the row failed at a higher rate than the base read off the interval
        without the bound that says how good the row is (so *better*, *equivalent* and *not worse* are withheld,
        *worse* and *not better* kept, an *equivalent* interval that excludes 0 is *worse*), and where the base
        failed more, without the bound that says how good the base is.
    """
    row_rate = np.asarray(row_failed) * np.asarray(base_runs)  # cross-multiplied: no division by zero runs
    base_rate = np.asarray(base_failed) * np.asarray(row_runs)
    row_more, base_more = row_rate > base_rate, base_rate > row_rate
    if goal == MINIMIZE:  # Δ's upper bound says how good the row is, its lower bound how good the base is
        lo, hi = np.where(base_more, -np.inf, lo), np.where(row_more, np.inf, hi)
    else:
        lo, hi = np.where(row_more, -np.inf, lo), np.where(base_more, np.inf, hi)
    return from_interval(lo, hi, goal, margin)


def name(code: int) -> str:
    """The verdict's word, as every format prints it: ``name(WORSE) == "worse"``."""
    return NAMES[int(code)]


def said(verdict: str | None, *codes: int) -> bool:
    """Whether ``verdict``, a verdict's word (:attr:`ablate.stats.compare.Comparison.verdict`), is the word of one of
    ``codes``: ``said(c.verdict, *DECIDED)``. Code outside this module asks this, never compares the words itself."""
    return verdict in {NAMES[int(code)] for code in codes}


def qualifier(code: int, lo: float, hi: float, goal: str) -> str:
    """What the interval proves beyond its verdict: an *equivalent* interval that also excludes 0 has found a
    difference, smaller than the margin ("worse, by less than the margin"); "" for every other verdict, whose name
    already says all the interval proves."""
    if int(code) != EQUIVALENT or not lo * hi > 0:
        return ""
    worse = (lo > 0) == (goal == MINIMIZE)
    return f"{NAMES[WORSE] if worse else NAMES[BETTER]}, by less than the margin"


def untested(codes: np.ndarray, lo: np.ndarray, n: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Rule: a row without an interval (``lo`` NaN) is *too few seeds* where a side has fewer than two values (``n``,
    ``m``: pairs, or each side's finished runs), else *cannot test* (no spread to test against); ``codes`` elsewhere."""
    return np.where(np.isnan(lo), np.where(np.minimum(n, m) < 2, TOO_FEW, CANNOT_TEST), codes)


def on_failures(codes: np.ndarray, rejected: np.ndarray, row_more: np.ndarray) -> np.ndarray:
    """Rule: where the exact test on the failure counts rejects equal rates (``rejected``), the row is *worse* if it
    fails more often (``row_more``), else *better*, whatever the goal and the interval; ``codes`` elsewhere."""
    return np.where(rejected, np.where(row_more, WORSE, BETTER), codes)


def no_common_step() -> str:
    """Rule: a contrast some of whose runs were stopped early (hyperband), with no logged step that all its finished
    and stopped runs reached, *cannot test*: its survivors alone are not a fair sample of their variant."""
    return NAMES[CANNOT_TEST]


def leaking(verdict: str | None, leaks: bool) -> str | None:
    """Rule: a row whose mask leaks labels (its positions see the tokens they are scored on) is *not comparable*
    (:data:`LEAKS`), whatever its interval says; ``verdict`` otherwise."""
    return LEAKS if leaks else verdict


def interaction(verdict: str, margin: str, small: str = "") -> str | None:
    """Rule: an interaction contrast's verdict says whether the effect of one factor depends on the other: *better* or
    *worse* (the interval excludes 0) is :data:`DEPENDS`; *equivalent* is no interaction beyond ±``margin`` (the
    margin as printed), with ``small``, what else the interval proves, after it; None for the other verdicts, which
    read as a row's."""
    if said(verdict, *SIGNED):
        return DEPENDS
    if said(verdict, EQUIVALENT):
        return NO_INTERACTION.format(margin=margin) + (f"; a small one: {small}" if small else "")
    return None


def trend(slope: tuple[float, float] | None, slope_diff: float | None, steps: Sequence[str | None],
          mean_delta: float | None) -> str:
    """Rule: what a ladder's row does across its sizes, from its verdicts at each step (``steps``) and the interval of
    its slope (``slope``, None when untested; ``slope_diff`` its estimate), checked in this order:

    - *flips sign*: it is better at one size and worse at another (both decided);
    - *grows* / *shrinks*: the slope's interval excludes 0 and |Δ| increases / decreases with size (the slope has
      the sign of ``mean_delta``, the row's Δ averaged over the steps / the opposite sign);
    - *consistent: V at every size*: the same decided verdict V (better, worse, equivalent) at every step, with no
      slope found;
    - *undecided* otherwise.
    """
    if {NAMES[code] for code in SIGNED} <= set(steps):
        return FLIPS
    if slope is not None and slope[0] * slope[1] > 0:
        return GROWS if mean_delta is not None and (slope_diff > 0) == (mean_delta > 0) else SHRINKS
    if steps and said(steps[0], *DECIDED) and len(set(steps)) == 1:
        return CONSISTENT.format(steps[0])
    return NAMES[UNDECIDED]
