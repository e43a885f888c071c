"""How sure the report is: each variant against the base on the headline metric, over seeds.

For a variant with runs x_1..x_n (one per seed) and the base with y_1..y_m:

- the difference: mean(x) - mean(y) (paired: the mean of x_s - y_s over the seeds both have);
- its interval: a percentile bootstrap at level 1 - alpha (``scipy.stats.bootstrap``), of the mean of the
  per-seed differences when the two share every seed (same seed = same data order and, where shapes
  allow, same initial weights), else of the difference of the two means, resampling each side;
- a p-value: paired t-test (``scipy.stats.ttest_rel``) when paired, else Welch's t-test
  (``scipy.stats.ttest_ind(equal_var=False)``);
- Holm's step-down correction across the variants compared with the base, and a verdict at alpha:
  ``better`` / ``worse`` when the corrected p-value is below alpha (in the direction of the metric's
  goal), else ``no detectable difference``;
- for an unresolved variant, how many seeds per variant a t-test at level alpha / (number of
  comparisons) would need for 80% power against the observed difference (noncentral t, ``scipy.stats.nct``);
- the probability of improvement P(variant beats base) of Agarwal et al. 2021 (``rliable``): the share of
  (x, y) pairs where x is better than y, ties counting one half (the Mann-Whitney U statistic / (n m)).

With fewer than two runs on either side nothing is tested and the verdict says so. With few seeds a
bootstrap interval is narrower than the truth (it can only resample what it saw): the verdict comes from
the t-test and its correction, not from the interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.8
BOOTSTRAP_RESAMPLES = 9999
MAX_SEEDS = 1000
BETTER, WORSE, UNRESOLVED, UNTESTED = "better", "worse", "no detectable difference", "too few seeds to test"


@dataclass(frozen=True)
class Comparison:
    """One variant against the base."""

    diff: float  # mean(variant) - mean(base), in the metric's units
    interval: tuple[float, float] | None  # bootstrap interval of the difference; None with one run on a side
    p: float | None  # two-sided p-value of the t-test; None when untested
    p_holm: float | None  # after Holm's correction across the comparisons
    paired: bool
    n: int  # variant runs (pairs when paired)
    m: int  # base runs
    prob_improvement: float  # P(variant beats base), ties count one half
    verdict: str
    seeds_needed: int | None  # seeds per variant for 80% power against this difference (unresolved variants)


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979): p_(i) * (m - i + 1), made monotone, at most 1.

    A hypothesis is rejected at level alpha exactly when its adjusted p-value is at most alpha.
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def probability_of_improvement(x: Sequence[float], y: Sequence[float], goal: str) -> float:
    """P(X better than Y) + P(X = Y) / 2 over every pair, as rliable defines it (minimize: lower is better)."""
    sign = -1.0 if goal == "minimize" else 1.0
    wins = sum((sign * (a - b) > 0) + 0.5 * (a == b) for a in x for b in y)
    return wins / (len(x) * len(y))


def _bootstrap(x: np.ndarray, y: np.ndarray, paired: bool, alpha: float) -> tuple[float, float] | None:
    if min(len(x), len(y)) < 2:
        return None
    if paired:
        data, statistic = (x - y,), np.mean
    else:
        data = (x, y)

        def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
            return np.mean(a, axis=axis) - np.mean(b, axis=axis)
    if np.ptp(np.concatenate(data)) == 0:  # every value the same: the interval is that one value
        d = float(np.mean(x) - np.mean(y))
        return d, d
    result = stats.bootstrap(data, statistic, confidence_level=1 - alpha, n_resamples=BOOTSTRAP_RESAMPLES,
                             method="percentile", paired=False, vectorized=True, rng=np.random.default_rng(0))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _ttest(x: np.ndarray, y: np.ndarray, paired: bool) -> float | None:
    if min(len(x), len(y)) < 2:
        return None
    d = x - y if paired else None
    if paired and np.ptp(d) == 0:  # every seed moved by the same amount: no variance to test against
        return 1.0 if d[0] == 0 else 0.0
    if not paired and np.ptp(x) == 0 and np.ptp(y) == 0:
        return 1.0 if x[0] == y[0] else 0.0
    test = stats.ttest_rel(x, y) if paired else stats.ttest_ind(x, y, equal_var=False)
    return float(test.pvalue)


def power(effect: float, sd_x: float, sd_y: float, n: int, alpha: float, paired: bool) -> float:
    """Power of the two-sided t-test at level alpha with n runs per variant (n pairs when paired).

    Paired: the differences have sd ``sd_x`` (``sd_y`` unused), df = n - 1. Welch with n per side: standard
    error sqrt((sd_x^2 + sd_y^2) / n), Welch-Satterthwaite degrees of freedom.
    """
    if paired:
        df, se = n - 1, sd_x / math.sqrt(n)
    else:
        var = sd_x**2 + sd_y**2
        df, se = (var**2) * (n - 1) / (sd_x**4 + sd_y**4), math.sqrt(var / n)
    nc = effect / se
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def seeds_needed(x: np.ndarray, y: np.ndarray, paired: bool, alpha: float, target: float = POWER) -> int | None:
    """The fewest seeds per variant (at least 2) whose t-test at ``alpha`` has ``target`` power against the
    observed difference, with the observed spread; None when it cannot be estimated or exceeds MAX_SEEDS."""
    if min(len(x), len(y)) < 2:
        return None
    effect = float(np.mean(x - y) if paired else np.mean(x) - np.mean(y))
    sd_x = float(np.std(x - y, ddof=1) if paired else np.std(x, ddof=1))
    sd_y = 0.0 if paired else float(np.std(y, ddof=1))
    if effect == 0 or (sd_x == 0 and sd_y == 0):
        return None
    for n in range(2, MAX_SEEDS + 1):
        if power(effect, sd_x, sd_y, n, alpha, paired) >= target:
            return n
    return None


def compare(variant: dict[int, float], base: dict[int, float], goal: str) -> Comparison:
    """One variant's runs against the base's, by seed (a run without a seed counts as its own seed).

    Holm's correction needs every comparison: :func:`compare_all` fills ``p_holm``, the verdict and
    ``seeds_needed``.
    """
    paired = set(variant) == set(base) and len(variant) >= 2
    seeds = sorted(variant) if paired else None
    x = np.array([variant[s] for s in seeds] if paired else list(variant.values()), dtype=float)
    y = np.array([base[s] for s in seeds] if paired else list(base.values()), dtype=float)
    diff = float(np.mean(x - y)) if paired else float(np.mean(x) - np.mean(y))
    p = _ttest(x, y, paired)
    return Comparison(diff=diff, interval=_bootstrap(x, y, paired, ALPHA), p=p, p_holm=None, paired=paired,
                      n=len(x), m=len(y), prob_improvement=probability_of_improvement(x, y, goal),
                      verdict=UNTESTED if p is None else UNRESOLVED, seeds_needed=None)


def compare_all(variants: dict[str, dict[int, float]], base: dict[int, float], goal: str,
                alpha: float = ALPHA) -> dict[str, Comparison]:
    """Every variant against the base, Holm-corrected across the variants that could be tested."""
    found = {name: compare(runs, base, goal) for name, runs in variants.items() if runs and base}
    tested = [name for name, c in found.items() if c.p is not None]
    adjusted = dict(zip(tested, holm([found[n].p for n in tested], alpha)))
    out = {}
    for name, c in found.items():
        if name not in adjusted:
            out[name] = c
            continue
        better = (c.diff < 0) == (goal == "minimize")
        verdict = (BETTER if better else WORSE) if adjusted[name] <= alpha else UNRESOLVED
        needed = None
        if verdict == UNRESOLVED:
            x, y = _arrays(variants[name], base, c.paired)
            needed = seeds_needed(x, y, c.paired, alpha / max(1, len(tested)))
        out[name] = Comparison(**{**c.__dict__, "p_holm": adjusted[name], "verdict": verdict, "seeds_needed": needed})
    return out


def _arrays(variant: dict[int, float], base: dict[int, float], paired: bool) -> tuple[np.ndarray, np.ndarray]:
    if paired:
        seeds = sorted(variant)
        return np.array([variant[s] for s in seeds]), np.array([base[s] for s in seeds])
    return np.array(list(variant.values()), dtype=float), np.array(list(base.values()), dtype=float)
