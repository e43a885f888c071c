"""One row against the base, look by look: Δ, its interval, the failure counts and the verdict.

Everything is vectorised over a leading axis of B independent sweeps, so the simulations that check what the
numbers mean (tests/stats) run this very code; a report calls it with B = 1. A failed run is NaN.

**Paired** (the row and the base ran the same seeds; same seed = same data order and initial weights): the
differences d_s = row_s - base_s over the seeds where both finished; Δ = mean(d), interval Δ ± c · sd(d)/sqrt(n).
**Unpaired** (fewer than two seeds in common): Welch's standard error with min(n, m) - 1 degrees of freedom (Hsu
1938): Welch-Satterthwaite's degrees of freedom undercover at a few seeds when the smaller side spreads more (0.92 for
a 95% interval at 2 vs 3 seeds, sd 4 vs 1); Hsu's cover at least their level whatever the two spreads.

**Error.** At each look the row may have spent ``design.spent(n)`` in all. While neither side has a failed run it
all goes to the values' interval; from the first failed run on, half of each later increment goes to Fisher's exact
test of the failure counts instead (conditional on the failures' total, the test is exact, and with failures
independent of the values the two parts together stay within the row's share).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ablate.stats import verdict as V
from ablate.stats.boundaries import critical_values
from ablate.stats.design import Design, Margin


@dataclass
class Judgement:
    """Arrays of shape (B,): the row at its reported look (where it was decided, else its last look)."""

    verdict: np.ndarray  # codes of ablate.stats.verdict
    diff: np.ndarray  # Δ = row - base from the same values as the interval (NaN without values)
    lo: np.ndarray  # the interval; NaN when untested
    hi: np.ndarray
    se: np.ndarray  # the standard error of Δ
    df: np.ndarray  # its degrees of freedom
    crit: np.ndarray  # the critical value: the interval is Δ ± crit · se
    spent: np.ndarray  # the cumulative error the values' intervals have spent (the interval's level is 1 - spent)
    n: np.ndarray  # pairs (paired), or the row's finished runs (unpaired)
    m: np.ndarray  # pairs (paired), or the base's finished runs (unpaired)
    row_failed: np.ndarray  # the row's failed runs among those the look counts
    base_failed: np.ndarray
    runs: np.ndarray  # the row's runs the look counts (finished or failed)
    base_runs: np.ndarray
    failure_p: np.ndarray  # Fisher's exact p on the failure counts; NaN where it was not tested
    on_failures: np.ndarray  # bool: the verdict comes from the failure counts
    margin: np.ndarray  # the margin in the metric's units (NaN: none)
    look: np.ndarray  # seeds at the reported look
    decided_at: np.ndarray  # seeds at the look that decided the row; 0 when undecided
    history: list[tuple] = field(default_factory=list)  # per sweep: ((pairs, spent), ...) at the looks judged


@functools.lru_cache(maxsize=4096)
def fisher_p(row_failed: int, row_runs: int, base_failed: int, base_runs: int) -> float:
    """Two-sided Fisher's exact test that the row and the base fail at the same rate."""
    table = [[row_failed, row_runs - row_failed], [base_failed, base_runs - base_failed]]
    return float(stats.fisher_exact(table).pvalue)


def _margins(margin: Margin | None, base: np.ndarray) -> np.ndarray:
    """The margin in the metric's units per sweep (a relative one is a percentage of the base's mean)."""
    if margin is None:
        return np.full(base.shape[0], np.nan)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a base with no finished run: no mean, no margin
        means = np.nanmean(base, axis=1) if base.shape[1] else np.full(base.shape[0], np.nan)
    return np.array([margin.absolute(float(mu)) or np.nan for mu in means])


def _verdicts(j: Judgement, goal: str, failure_level: np.ndarray) -> np.ndarray:
    """Verdicts from the intervals through the failure guard, then the failure counts' own test at its level."""
    codes = V.guard(j.lo, j.hi, goal, j.margin, j.row_failed, j.runs, j.base_failed, j.base_runs)
    codes = V.untested(codes, j.lo, j.n, j.m)
    differ = j.row_failed * j.base_runs != j.base_failed * j.runs
    j.failure_p = np.array([fisher_p(*map(int, t)) if d else np.nan for t, d in
                            zip(zip(j.row_failed, j.runs, j.base_failed, j.base_runs), differ)])
    j.on_failures = differ & (j.failure_p <= failure_level)
    row_more = j.row_failed * j.base_runs > j.base_failed * j.runs
    return V.on_failures(codes, j.on_failures, row_more)


RESOLUTION = 1e-12  # a spread below this fraction of the values' size is rounding, not spread


def _interval(diff: np.ndarray, se: np.ndarray, crit: np.ndarray, n: np.ndarray, m: np.ndarray, scale: np.ndarray):
    """Δ ± crit · se, NaN where fewer than two values on a side or no spread to test against (a standard error
    within floating-point rounding of values of size ``scale``: seeds that moved by the same amount)."""
    testable = (np.minimum(n, m) >= 2) & (se > RESOLUTION * scale) & np.isfinite(crit)
    with np.errstate(all="ignore"):
        lo, hi = diff - crit * se, diff + crit * se
    return np.where(testable, lo, np.nan), np.where(testable, hi, np.nan)


def _scale(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The size of each sweep's values: the largest finite |value| on either side."""
    both = np.abs(np.concatenate([x, y], axis=1))
    return np.max(np.where(np.isfinite(both), both, 0.0), axis=1, initial=0.0)


def judge_paired(x: np.ndarray, y: np.ndarray, design: Design, goal: str,
                 reference: np.ndarray | None = None) -> Judgement:
    """The row ``x`` against the base ``y``, both (B, N): the design's first N seeds, in order; NaN = failed.

    A fixed design looks once, at N; a sequential one at each of ``design.looks(N)`` and reports the look that
    decided the row (better, worse, equivalent), else the last. A relative margin is a percentage of the mean of
    ``reference`` (B, N; the base ``y`` by default) over the seeds of each look: what that look saw, so that seeds
    added later (to the base, for another row) cannot move the margin of a decision already taken.
    """
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    reference = y if reference is None else np.atleast_2d(np.asarray(reference, float))
    B, N = x.shape
    looks = design.looks(N) or [N]
    stopped = np.zeros(B, bool)
    history: list[tuple] = [()] * B  # per sweep: ((pairs, spent), ...) at the looks that added a pair
    spent, failed_any, previous = np.zeros(B), np.zeros(B, bool), 0.0
    out: Judgement | None = None
    for n in looks:
        increment, previous = design.spent(n) - previous, design.spent(n)
        xs, ys = x[:, :n], y[:, :n]
        row_failed, base_failed = np.isnan(xs).sum(1), np.isnan(ys).sum(1)
        failed_any |= (row_failed + base_failed) > 0
        share = np.where(failed_any, 0.5, 1.0)
        spent, fail_level = spent + increment * share, increment * (1 - share)
        d = xs - ys
        k = np.isfinite(d).sum(1)
        with np.errstate(all="ignore"):
            diff = np.nansum(d, 1) / k
            sd = np.sqrt(np.nansum((d - diff[:, None]) ** 2, 1) / (k - 1))
        crit, level = np.full(B, np.inf), spent.copy()  # a look that added no pair keeps the last one's
        cache: dict[tuple, float] = {}
        for b in np.flatnonzero(~stopped & (k >= 2)):
            h = history[b]
            if not h or k[b] > h[-1][0]:
                h = history[b] = h + ((int(k[b]), float(spent[b])),)
            if h not in cache:
                counts, budget = zip(*h)
                cache[h] = critical_values(counts, budget)[-1]
            crit[b], level[b] = cache[h], h[-1][1]
        with np.errstate(all="ignore"):
            se = sd / np.sqrt(k)
        lo, hi = _interval(diff, se, crit, k, k, _scale(xs, ys))
        j = Judgement(verdict=np.zeros(B, int), diff=diff, lo=lo, hi=hi, se=se, df=k - 1.0, crit=crit, spent=level,
                      n=k, m=k, row_failed=row_failed, base_failed=base_failed, runs=np.full(B, n),
                      base_runs=np.full(B, n), failure_p=np.full(B, np.nan), on_failures=np.zeros(B, bool),
                      margin=_margins(design.margin, reference[:, :n]), look=np.full(B, n),
                      decided_at=np.zeros(B, int))
        j.verdict = _verdicts(j, goal, fail_level)
        out = j if out is None else _keep(out, j, stopped)
        newly = ~stopped & np.isin(j.verdict, V.DECIDED)
        out.decided_at[newly] = n
        if design.sequential:
            stopped |= newly
    out.history = history
    return out


def _keep(old: Judgement, new: Judgement, stopped: np.ndarray) -> Judgement:
    """``new`` for the sweeps still going, ``old`` for those stopped at an earlier look."""
    fields = {}
    for name in Judgement.__dataclass_fields__:
        a, b = getattr(old, name), getattr(new, name)
        fields[name] = a if name in ("decided_at", "history") else np.where(stopped, a, b)
    return Judgement(**fields)


def judge_unpaired(x: np.ndarray, y: np.ndarray, design: Design, goal: str,
                   reference: np.ndarray | None = None) -> Judgement:
    """The row's runs ``x`` (B, n) against the base's ``y`` (B, m), fewer than two seeds in common: Welch's standard
    error, Hsu's degrees of freedom, at the row's share of the error (a fixed design, one look). NaN = failed. A
    relative margin is a percentage of ``reference``'s mean (the base ``y`` by default)."""
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    reference = y if reference is None else np.atleast_2d(np.asarray(reference, float))
    B = x.shape[0]
    row_failed, base_failed = np.isnan(x).sum(1), np.isnan(y).sum(1)
    n, m = x.shape[1] - row_failed, y.shape[1] - base_failed
    share = np.where(row_failed + base_failed > 0, 0.5, 1.0)
    spent = design.row_alpha * share
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with fewer than two values: NaN, untested below
        vx, vy = np.nanvar(x, 1, ddof=1) / n, np.nanvar(y, 1, ddof=1) / m
        diff = np.nanmean(x, 1) - np.nanmean(y, 1)
        se = np.sqrt(vx + vy)
        df = np.minimum(n, m) - 1.0
        crit = stats.t.ppf(1 - spent / 2, df)
    lo, hi = _interval(diff, se, crit, n, m, _scale(x, y))
    j = Judgement(verdict=np.zeros(B, int), diff=diff, lo=lo, hi=hi, se=se, df=df, crit=crit, spent=spent, n=n, m=m,
                  row_failed=row_failed, base_failed=base_failed, runs=np.full(B, x.shape[1]),
                  base_runs=np.full(B, y.shape[1]), failure_p=np.full(B, np.nan), on_failures=np.zeros(B, bool),
                  margin=_margins(design.margin, reference), look=np.full(B, x.shape[1]),
                  decided_at=np.zeros(B, int))
    j.verdict = _verdicts(j, goal, design.row_alpha * (1 - share))
    j.decided_at[np.isin(j.verdict, V.DECIDED)] = x.shape[1]
    j.history = [((int(a), float(b)),) for a, b in zip(n, spent)]
    return j
