"""Critical values of repeated t intervals: how far |t| must go at each look so that every look's interval, together,
covers the true difference with probability 1 - (the error spent).

A row is judged at looks k = 1..K with n_1 < n_2 < ... < n_K paired seeds (nested: each look keeps the earlier
pairs). Its interval at look k is ``d_k ± c_k · s_k / sqrt(n_k)`` (Jennison & Turnbull 1989, repeated confidence
intervals). With iid normal per-seed differences, T_k = (d_k - Δ) / (s_k / sqrt(n_k)) has the same joint law for
every Δ and σ, so the c_k below make P(|T_k| <= c_k for every k) = 1 - a_K exactly, whatever the true Δ: any rule
that stops on the intervals (better, worse, equivalent) keeps that coverage. ``a_k`` is the cumulative error
allowed by look k (an error-spending function, Lan & DeMets 1983).

One look is the fixed design: c = the t quantile, n - 1 degrees of freedom (the paired t interval, exactly).
For more looks c_1 is exact and c_k (k > 1) is set on :data:`PATHS` simulated null paths: the quantile of |T_k|
among the paths that crossed no earlier boundary that spends a_k - a_{k-1}. When that increment is too small to
resolve (fewer than :data:`MIN_EXCEEDANCES` paths), c_k is the marginal t quantile at the increment, which
overspends nothing (it ignores the correlation between looks). The paths come from one fixed seed, column by
column, so the boundaries are the same on every machine and for every budget of seeds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

PATHS = 1 << 18  # simulated null paths for the boundaries of more than one look
MIN_EXCEEDANCES = 50  # an increment resolved by fewer paths falls back to the marginal t quantile
SEED = 20261123


class _NullPaths:
    """|T_n| of PATHS paths of iid N(0, 1) per-seed differences, for n = 2, 3, ..., grown on demand."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(SEED)
        self.s1 = np.zeros(PATHS)
        self.s2 = np.zeros(PATHS)
        self.n = 0
        self.abs_t: dict[int, np.ndarray] = {}

    def __call__(self, n: int) -> np.ndarray:
        while self.n < n:
            z = self.rng.standard_normal(PATHS)
            self.s1 += z
            self.s2 += z * z
            self.n += 1
            if self.n >= 2:
                mean = self.s1 / self.n
                var = np.maximum(self.s2 - self.n * mean * mean, 0.0) / (self.n - 1)
                self.abs_t[self.n] = np.abs(mean / np.sqrt(var / self.n)).astype(np.float32)
        return self.abs_t[n]


_paths = _NullPaths()


def marginal(n: int, error: float) -> float:
    """The two-sided t critical value with n - 1 degrees of freedom that |T| exceeds with probability ``error``."""
    return math.inf if error <= 0 else float(stats.t.ppf(1 - error / 2, n - 1))


@functools.lru_cache(maxsize=4096)
def critical_values(counts: tuple[int, ...], spent: tuple[float, ...]) -> tuple[float, ...]:
    """The critical values c_1..c_K of the looks with ``counts`` pairs.

    Args:
        counts: pairs at each look, strictly increasing, each at least 2.
        spent: the cumulative error a_k allowed by each look, non-decreasing, in (0, 1).

    Returns:
        c_k for each look (``inf`` where a look spends nothing).

    Raises:
        ValueError: counts not increasing or below 2, or spent decreasing.
    """
    if any(n < 2 for n in counts) or any(b <= a for a, b in zip(counts, counts[1:])):
        raise ValueError(f"looks need strictly increasing pair counts of at least 2, got {counts}")
    if len(spent) != len(counts) or any(b < a for a, b in zip(spent, spent[1:])) or spent[0] < 0:
        raise ValueError(f"spent error must be non-decreasing and one per look, got {spent}")
    out = [marginal(counts[0], spent[0])]
    if len(counts) == 1:
        return tuple(out)
    alive = np.flatnonzero(_paths(counts[0]) <= out[0])
    for k in range(1, len(counts)):
        increment = spent[k] - spent[k - 1]
        exceed = int(round(increment * PATHS))
        values = _paths(counts[k])[alive]
        if exceed < MIN_EXCEEDANCES or exceed >= len(values):
            c = marginal(counts[k], increment)
        else:  # exactly `exceed` surviving paths lie beyond c
            c = float(np.partition(values, len(values) - exceed - 1)[len(values) - exceed - 1])
        out.append(c)
        alive = alive[values <= c]
    return tuple(out)
