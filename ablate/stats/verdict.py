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

Failed runs are outcomes (:func:`guard`): the side that fails more often cannot be found at least as good from the
runs that survived (they are its luckier seeds), and an exact test on the failure counts can call a row worse (or
better) on that ground alone.
"""

from __future__ import annotations

import numpy as np

BETTER, WORSE, EQUIVALENT, NOT_WORSE, NOT_BETTER, UNDECIDED, CANNOT_TEST, TOO_FEW = range(8)
NAMES = ("better", "worse", "equivalent", "not worse", "not better", "undecided", "cannot test", "too few seeds")
DECIDED = (BETTER, WORSE, EQUIVALENT)  # a sequential design stops adding seeds to a row with one of these
FAVOURS_ROW = (BETTER, EQUIVALENT, NOT_WORSE)  # claims the row is at least as good as the base, within the margin
FAVOURS_BASE = (WORSE, EQUIVALENT, NOT_BETTER)


def from_interval(lo: np.ndarray, hi: np.ndarray, goal: str, margin: float | np.ndarray | None) -> np.ndarray:
    """The verdict codes of intervals [lo, hi] of Δ (arrays of one shape), for the goal and the margin (None or
    NaN: no margin, so no verdict that needs one)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    ilo, ihi = (-hi, -lo) if goal == "minimize" else (lo, hi)
    m = np.nan if margin is None else np.asarray(margin, float)  # every comparison with NaN is False
    conditions = [(ilo > -m) & (ihi < m), ilo > 0, ihi < 0, ilo > -m, ihi < m]
    return np.select(conditions, [EQUIVALENT, BETTER, WORSE, NOT_WORSE, NOT_BETTER], UNDECIDED)


def guard(codes: np.ndarray, row_failed: np.ndarray, row_runs: np.ndarray, base_failed: np.ndarray,
          base_runs: np.ndarray) -> np.ndarray:
    """Withhold the verdicts that the side failing more often would get from its survivors alone.

    Args:
        codes: verdicts from the intervals.
        row_failed, row_runs: the row's failed runs and its runs that ended (failed or finished), at the look.
        base_failed, base_runs: the same for the base.

    Returns:
        ``codes`` with *better*, *equivalent* and *not worse* made *undecided* where the row failed at a higher
        rate than the base, and *worse*, *equivalent* and *not better* where the base did.
    """
    row_rate = np.asarray(row_failed) * np.asarray(base_runs)  # cross-multiplied: no division by zero runs
    base_rate = np.asarray(base_failed) * np.asarray(row_runs)
    codes = np.array(codes, copy=True)
    codes[(row_rate > base_rate) & np.isin(codes, FAVOURS_ROW)] = UNDECIDED
    codes[(base_rate > row_rate) & np.isin(codes, FAVOURS_BASE)] = UNDECIDED
    return codes


def name(code: int) -> str:
    return NAMES[int(code)]


def qualifier(code: int, lo: float, hi: float, goal: str) -> str:
    """What the interval proves beyond its verdict: an *equivalent* interval that also excludes 0 has found a
    difference, smaller than the margin ("worse, by less than the margin"); "" for every other verdict, whose name
    already says all the interval proves."""
    if int(code) != EQUIVALENT or not lo * hi > 0:
        return ""
    worse = (lo > 0) == (goal == "minimize")
    return f"{'worse' if worse else 'better'}, by less than the margin"
