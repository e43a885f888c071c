"""A row against the base: the interval is the test inverted, on fixed numbers (against scipy.stats) and in what it
means (coverage, agreement with the verdict, equivalence's error at the margin), simulated on the very code a report
runs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ablate.stats import verdict as V
from ablate.stats.design import Design, Margin
from ablate.stats.judge import judge_paired, judge_unpaired
from tests.stats.conftest import SIMS, mc_se, sweep

ROW = np.array([2.20, 2.22, 2.18, 2.31])
BASE = np.array([2.00, 2.10, 1.95, 2.05])


def test_paired_interval_and_verdict_against_scipy():
    design = Design(rows=3)
    j = judge_paired(ROW, BASE, design, "minimize")
    ci = stats.ttest_rel(ROW, BASE).confidence_interval(1 - 0.05 / 3)
    assert (j.lo[0], j.hi[0]) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert j.diff[0] == pytest.approx(np.mean(ROW - BASE)) and j.verdict[0] == V.WORSE
    assert j.spent[0] == pytest.approx(0.05 / 3) and j.n[0] == 4


def test_unpaired_interval_is_welchs_standard_error_with_hsus_degrees_of_freedom():
    row, base = np.array([2.9, 3.1, 3.0]), np.array([2.0, 2.1, 1.95, 2.05, 2.3])
    j = judge_unpaired(row, base, Design(rows=2), "minimize")
    welch = stats.ttest_ind(row, base, equal_var=False)
    diff = row.mean() - base.mean()
    half = stats.t.ppf(1 - 0.05 / 4, df=2) * diff / welch.statistic  # se = diff / t; df = min(3, 5) - 1
    assert (j.lo[0], j.hi[0]) == pytest.approx((diff - half, diff + half), rel=1e-12)
    assert (j.n[0], j.m[0]) == (3, 5) and j.verdict[0] == V.WORSE


def test_verdicts_read_off_the_interval_for_both_goals_and_a_margin():
    lo, hi = np.array([-0.5, 0.1, -0.05, -0.02, -0.3, -0.01, -0.3]), np.array([-0.1, 0.4, 0.05, 0.3, 0.05, 0.3, 0.3])
    minimize = [V.name(c) for c in V.from_interval(lo, hi, "minimize", 0.08)]
    assert minimize == ["better", "worse", "equivalent", "not better", "not worse", "not better", "undecided"]
    maximize = [V.name(c) for c in V.from_interval(lo, hi, "maximize", 0.08)]
    assert maximize == ["worse", "better", "equivalent", "not worse", "not better", "not worse", "undecided"]
    assert [V.name(c) for c in V.from_interval(lo, hi, "minimize", None)] == \
        ["better", "worse", "undecided", "undecided", "undecided", "undecided", "undecided"]


@pytest.mark.parametrize("n", [2, 3, 5, 10])
@pytest.mark.parametrize("paired", [True, False])
def test_simultaneous_intervals_cover_and_never_disagree_with_the_verdict(n, paired):
    """Five rows against one base (two with a true effect), 20,000 sweeps: all five intervals cover their true Δ
    together in at least 95% of sweeps (the stated simultaneous level), and a verdict says better or worse exactly
    when its interval excludes 0."""
    rng = np.random.default_rng(n + 10 * paired)
    deltas = [0.0, 0.0, 0.0, 0.5, -1.0]
    design = Design(rows=len(deltas))
    if paired:
        base, rows = sweep(rng, rows=5, seeds=n, delta=deltas)
    else:  # unequal spreads and seed counts, the smaller side spreading more: where Welch's df undercover
        base = rng.normal(0, 1.0, (SIMS, n + 1))
        rows = [rng.normal(d, 4.0, (SIMS, n)) for d in deltas]
    judge = judge_paired if paired else judge_unpaired
    covered = np.ones(SIMS, bool)
    for delta, row in zip(deltas, rows):
        j = judge(row, base, design, "minimize")
        covered &= (j.lo <= delta) & (delta <= j.hi)
        excludes = (j.lo > 0) | (j.hi < 0)
        assert np.array_equal(excludes, np.isin(j.verdict, (V.BETTER, V.WORSE)))
    assert covered.mean() >= 0.95 - 3 * mc_se(0.95)


@pytest.mark.parametrize("n", [3, 5, 10])
def test_equivalence_at_the_margin_is_claimed_at_most_alpha_of_the_time(n):
    """A true Δ exactly at the margin is not equivalent: the interval-inside-the-margin rule (TOST at the row's level)
    claims it in at most alpha / rows of sweeps; and a true Δ = 0 gets 'worse' or 'better' no more than that."""
    rng = np.random.default_rng(n)
    margin, rows = 0.5, 2
    design = Design(rows=rows, margin=Margin(margin))
    base, (at_margin, null) = sweep(rng, rows=2, seeds=n, delta=[margin, 0.0], sd=1.0, rho=0.5)
    equivalent = np.mean(judge_paired(at_margin, base, design, "minimize").verdict == V.EQUIVALENT)
    wrong = np.mean(np.isin(judge_paired(null, base, design, "minimize").verdict, (V.BETTER, V.WORSE)))
    limit = 0.05 / rows
    assert equivalent <= limit + 3 * mc_se(limit) and wrong <= limit + 3 * mc_se(limit)


def test_zero_spread_is_cannot_test_not_p_zero():
    """Two seeds that moved by exactly the same amount: no spread to test against, so no interval and no verdict."""
    j = judge_paired([1.0, 1.5], [0.8, 1.3], Design(), "minimize")
    assert j.verdict[0] == V.CANNOT_TEST and np.isnan(j.lo[0]) and j.diff[0] == pytest.approx(0.2)
    j = judge_unpaired([1.0, 1.0], [2.0, 2.0, 2.0], Design(), "minimize")
    assert j.verdict[0] == V.CANNOT_TEST
    # the same amount in decimal is not always the same in binary: 3.108142 - 3 and 3.079858 - 2.971716 differ in the
    # 16th digit; that is rounding, not spread
    j = judge_paired([3.108142, 3.079858], [3.0, 2.971716], Design(), "minimize")
    assert j.verdict[0] == V.CANNOT_TEST


def test_one_value_on_a_side_is_too_few():
    assert judge_paired([2.5], [2.0], Design(), "minimize").verdict[0] == V.TOO_FEW
    assert judge_unpaired([2.5], [2.0, 2.1], Design(), "minimize").verdict[0] == V.TOO_FEW


@pytest.mark.parametrize("n", [3, 5, 10])
def test_a_relative_margin_at_its_edge_is_claimed_equivalent_at_most_alpha_of_the_time(n):
    """A margin of "2%": 2 % of the base's mean, estimated from the base's own runs in each sweep. A true Δ exactly
    at 2 % of the true base mean is called equivalent in at most alpha / rows of sweeps, and a true Δ of 0 is called
    equivalent most of the time once the seeds resolve it."""
    rng = np.random.default_rng(100 + n)
    rows, level = 2, 10.0
    design = Design(rows=rows, margin=Margin.parse("2%"))
    base, (at_margin, null) = sweep(rng, rows=2, seeds=n, delta=[0.02 * level, 0.0], sd=0.1, rho=0.8)
    base, at_margin, null = base + level, at_margin + level, null + level
    equivalent = np.mean(judge_paired(at_margin, base, design, "minimize").verdict == V.EQUIVALENT)
    limit = 0.05 / rows
    assert equivalent <= limit + 3 * mc_se(limit)
    if n == 10:
        assert np.mean(judge_paired(null, base, design, "minimize").verdict == V.EQUIVALENT) > 0.9
