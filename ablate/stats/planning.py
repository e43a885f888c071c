"""Planning without post-hoc power: what the seeds could have detected, and what a margin would need.

Power against the *observed* Δ with the observed sd promises what it cannot keep (a pilot's Δ and sd are noisy);
instead:

- **detectable Δ**: the smallest |Δ| the row's test at its look (critical value c, its degrees of freedom) would
  find with 80% power, taking the sd at its one-sided 90% upper confidence bound, so that in at least 90% of
  sweeps the seeds really had that power (``detectable``);
- **seeds for a margin m**: the fewest seeds a fixed design at the row's share of the error needs so that a true
  |Δ| = m is found (better or worse) and a true Δ = 0 is found equivalent, each with 80% power; computed with the
  observed sd and with its upper bound, as a range (``seeds_for_margin``).

Unpaired (Welch) rows use the same formulas with Welch's standard error and degrees of freedom (approximate).
"""

from __future__ import annotations

import functools
import math

from scipy import integrate, optimize, stats

POWER = 0.8
SD_CONFIDENCE = 0.9  # one-sided confidence of the sd's upper bound
MAX_PLANNED = 1000  # beyond this many seeds a plan says ">1000"
TAIL = 1e-12  # the chi-square mass left out of the equivalence integral, on each side


def sd_upper(sd: float, df: float, confidence: float = SD_CONFIDENCE) -> float:
    """The one-sided upper confidence bound of a standard deviation (chi-square with ``df`` degrees of freedom)."""
    return sd * math.sqrt(df / stats.chi2.ppf(1 - confidence, df))


def power(nc: float, df: float, crit: float) -> float:
    """P(|T| > crit) for T noncentral t with ``df`` degrees of freedom and noncentrality ``nc`` (two-sided test)."""
    upper = stats.nct.sf(crit, df, abs(nc))
    lower = stats.nct.sf(crit, df, -abs(nc))  # P(T < -crit) by symmetry: scipy's nct.cdf(-crit) can return NaN
    if math.isnan(upper):  # far in the tail scipy's series can fail: there the mass is all beyond crit
        upper = 1.0 if abs(nc) > crit else 0.0
    return float(upper + (0.0 if math.isnan(lower) else lower))


@functools.lru_cache(maxsize=1024)
def _noncentrality(df: float, crit: float, target: float = POWER) -> float:
    """The noncentrality at which the two-sided test at ``crit`` has ``target`` power."""
    hi = crit + 4.0
    while power(hi, df, crit) < target:
        hi *= 2
    return float(optimize.brentq(lambda nc: power(nc, df, crit) - target, 0.0, hi, xtol=1e-10))


def detectable(se: float, df: float, crit: float, confidence: float = SD_CONFIDENCE) -> float:
    """The smallest |Δ| a test with standard error ``se`` (at ``df`` degrees of freedom) and critical value
    ``crit`` detects with 80% power, with the standard error at its upper confidence bound."""
    if not (math.isfinite(crit) and se > 0 and df >= 1):
        return math.nan
    return _noncentrality(df, crit) * sd_upper(se, df, confidence)


def _decides(n: int, sd: float, margin: float, alpha: float) -> bool:
    """Whether n paired seeds at two-sided level ``alpha`` reach 80% power both to find |Δ| = margin and to find
    Δ = 0 equivalent within ±margin (interval |d| + c s/sqrt(n) < margin)."""
    df, crit = n - 1, float(stats.t.ppf(1 - alpha / 2, n - 1))
    if power(margin * math.sqrt(n) / sd, df, crit) < POWER:
        return False
    # P(|mean| < margin - crit s / sqrt(n)) with mean ~ N(0, sd^2/n), (n-1) s^2/sd^2 ~ chi2(df)
    chi2 = stats.chi2(df)
    lo, hi = chi2.ppf(TAIL), min(df * n * margin**2 / (crit * sd) ** 2, chi2.isf(TAIL))  # where the integrand lives

    def inside(w: float) -> float:
        return (2 * stats.norm.cdf(math.sqrt(n) * margin / sd - crit * math.sqrt(w / df)) - 1) * chi2.pdf(w)

    if hi <= lo:
        return False
    breaks = [p for p in (df - 2, df, df + 2) if lo < p < hi]
    equivalent, _ = integrate.quad(inside, lo, hi, points=breaks or None, limit=200)
    return equivalent >= POWER


def seeds_for_margin(sd: float, margin: float, alpha: float) -> int | None:
    """The fewest seeds (at least 2) of a fixed paired design at two-sided level ``alpha`` that decide a margin
    (see :func:`_decides`); None beyond :data:`MAX_PLANNED`."""
    if not (sd > 0 and margin > 0):
        return 2 if sd == 0 and margin > 0 else None
    if not _decides(MAX_PLANNED, sd, margin, alpha):
        return None
    lo, hi = 1, 2
    while not _decides(hi, sd, margin, alpha):
        lo, hi = hi, min(MAX_PLANNED, hi * 2)
    while hi - lo > 1:  # _decides(lo) is False (or lo = 1), _decides(hi) is True
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _decides(mid, sd, margin, alpha) else (mid, hi)
    return hi
