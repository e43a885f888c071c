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
"""

from __future__ import annotations

import numpy as np

from ablate.stats.design import MINIMIZE

BETTER, WORSE, EQUIVALENT, NOT_WORSE, NOT_BETTER, UNDECIDED, CANNOT_TEST, TOO_FEW = range(8)
NAMES = ("better", "worse", "equivalent", "not worse", "not better", "undecided", "cannot test", "too few seeds")
DECIDED = (BETTER, WORSE, EQUIVALENT)  # a sequential design stops adding seeds to a row with one of these
SIGNED = (BETTER, WORSE)  # the verdicts that prove the sign of Δ: the interval excludes 0


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
