"""Skewed per-seed differences: the one assumption of the paired t interval that a table can check, and an exact test
that does without it.

The paired t interval assumes the per-seed differences d_s = row_s - base_s are roughly normal. Heavy tails cost it
little (it stays conservative), but skew at a few seeds moves its error: with the row's runs lognormal and the
base's normal, equal means, 3 seeds, some verdict of a table was false in 6.1 % of simulated tables, not 5 %.

- **skewness**: the adjusted Fisher-Pearson sample skewness G1 of the differences (``scipy.stats.skew(bias=False)``),
  with 3 pairs or more. A row is flagged *skewed* when |G1| is beyond what normal differences reach in 1 % of sweeps
  at that many seeds (the quantile set once, by simulation, per seed count): rare by chance, so a flag means
  something. At 3 or 4 seeds G1 is bounded and the flag seldom fires: no test can see skew in so few values.
- **sign flip**: under the null that d is symmetric about 0, every one of the 2^n sign patterns of d is equally
  likely, so the share of patterns whose |sum| is at least the observed one is an exact p-value whatever the shape
  (Fisher 1935), given for n <= ``SIGN_FLIP_MAX``. It cannot go below 2 / 2^n: at 3 seeds 0.25, which is the honest
  answer to "is this row better" without the normal assumption.

Everything is vectorised over a leading axis of B sweeps for the simulations in tests/stats.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from itertools import product

import numpy as np
from scipy import stats

FLAG_RATE = 0.01  # normal differences are flagged skewed in this share of sweeps
NULL_SIMS = 200_000  # simulated normal samples that set the flag's quantile at each seed count
SIGN_FLIP_MAX = 12  # the exact test enumerates 2^n sign patterns: 4,096 at 12 seeds
ROUNDING = 1e-9  # sums within this fraction of the observed |sum| count as ties (floating-point rounding)


@dataclass(frozen=True)
class Check:
    """One row's differences: their skewness, whether it is flagged, and the exact sign-flip p (Bonferroni)."""

    g1: float | None = None
    skewed: bool = False
    sign_flip_p: float | None = None


def skewness(d: np.ndarray) -> np.ndarray:
    """G1 of each row of ``d`` (B, n), finite values only (``scipy.stats.skew(bias=False)``); NaN with fewer than 3
    values or no spread (a spread within floating-point rounding of the values' size)."""
    d = np.atleast_2d(np.asarray(d, float))
    finite = np.isfinite(d)
    n = finite.sum(1)
    d = np.where(finite, d, np.nan)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # no spread: scipy warns and returns NaN or noise
        g1 = stats.skew(d, axis=1, bias=False, nan_policy="omit" if not finite.all() else "propagate")
        spread = np.nanvar(d, axis=1) > (1e-12 * np.max(np.where(finite, np.abs(d), 0.0), axis=1, initial=0.0)) ** 2
    return np.where((n >= 3) & spread, np.asarray(g1, float), np.nan)


@functools.lru_cache(maxsize=None)
def threshold(n: int) -> float:
    """The |G1| that normal differences of ``n`` seeds exceed in ``FLAG_RATE`` of sweeps (simulated once)."""
    rng = np.random.default_rng(1935 + n)
    return float(np.quantile(np.abs(skewness(rng.standard_normal((NULL_SIMS, n)))), 1 - FLAG_RATE))


@functools.lru_cache(maxsize=None)
def _signs(n: int) -> np.ndarray:
    """Every sign pattern of n values, (2^n, n)."""
    return np.array(list(product((1.0, -1.0), repeat=n)))


def sign_flip_p(d: np.ndarray) -> np.ndarray:
    """The two-sided exact sign-flip p of each row of ``d`` (B, n), all values finite; NaN for n > SIGN_FLIP_MAX."""
    d = np.atleast_2d(np.asarray(d, float))
    B, n = d.shape
    if n > SIGN_FLIP_MAX or n == 0:
        return np.full(B, np.nan)
    signs = _signs(n)
    observed = np.abs(d.sum(1))
    out = np.empty(B)
    for start in range(0, B, 4096):  # (chunk, 2^n) sums at a time
        sums = np.abs(d[start:start + 4096] @ signs.T)
        out[start:start + 4096] = np.mean(sums >= observed[start:start + 4096, None] * (1 - ROUNDING), axis=1)
    return out


def check(d: np.ndarray, rows: int) -> Check:
    """One row's per-seed differences ``d`` (NaN: a failed seed, left out) in a family of ``rows`` comparisons."""
    d = np.asarray(d, float)
    d = d[np.isfinite(d)]
    g1 = float(skewness(d)[0]) if len(d) else float("nan")
    p = float(sign_flip_p(d)[0]) if 1 <= len(d) <= SIGN_FLIP_MAX else float("nan")
    skewed = not np.isnan(g1) and bool(abs(g1) > threshold(len(d)))
    return Check(g1=None if np.isnan(g1) else g1, skewed=skewed,
                 sign_flip_p=None if np.isnan(p) else min(1.0, p * max(1, rows)))
