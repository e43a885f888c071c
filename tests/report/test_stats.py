"""The report's statistics, each computed here independently: the bootstrap by exhaustive enumeration, t-tests
from their formulas, Holm's correction from its definition, power by simulation, P(improvement) by scipy's
Mann-Whitney U."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ablate.report.stats import (BETTER, UNRESOLVED, UNTESTED, WORSE, compare, compare_all, holm,
                                 probability_of_improvement, seeds_needed)

BASE = {0: 2.00, 1: 2.10, 2: 1.95, 3: 2.05}
VARIANT = {0: 2.20, 1: 2.22, 2: 2.18, 3: 2.31}  # worse (higher loss) on every seed


def _exact_bootstrap_interval(values: list[float], alpha: float = 0.05) -> tuple[float, float]:
    """Every resample of the values (n^n of them, equally likely), its mean; the alpha/2 quantiles."""
    means = sorted(float(np.mean(sample)) for sample in itertools.product(values, repeat=len(values)))
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def test_paired_difference_interval_and_p_value():
    c = compare(VARIANT, BASE, "minimize")
    d = [VARIANT[s] - BASE[s] for s in range(4)]
    assert c.paired and c.n == c.m == 4
    assert c.diff == pytest.approx(np.mean(d))
    low, high = _exact_bootstrap_interval(d)
    assert c.interval[0] == pytest.approx(low, abs=0.004) and c.interval[1] == pytest.approx(high, abs=0.004)
    t = np.mean(d) / (np.std(d, ddof=1) / math.sqrt(4))  # the paired t statistic, written out
    assert c.p == pytest.approx(2 * stats.t.sf(abs(t), df=3), rel=1e-9)
    assert c.p == pytest.approx(stats.ttest_rel(list(VARIANT.values()), list(BASE.values())).pvalue, rel=1e-9)


def test_two_seed_paired_interval_spans_the_two_differences():
    """With two pairs the bootstrap means are d1, d2 (a quarter each) and their mean (a half): the 95%
    interval runs from the smaller difference to the larger."""
    c = compare({0: 1.0, 1: 1.5}, {0: 0.8, 1: 1.1}, "minimize")
    assert c.interval == pytest.approx((0.2, 0.4))


def test_unpaired_runs_get_welchs_test_and_a_two_sample_bootstrap():
    variant = {10: 2.4, 11: 2.6, 12: 2.5}  # other seeds than the base's: nothing to pair
    c = compare(variant, BASE, "minimize")
    x, y = np.array(list(variant.values())), np.array(list(BASE.values()))
    vx, vy = x.var(ddof=1) / 3, y.var(ddof=1) / 4
    t = (x.mean() - y.mean()) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / 2 + vy**2 / 3)  # Welch-Satterthwaite
    assert not c.paired and c.p == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9)
    means = sorted(float(np.mean(a) - np.mean(b)) for a in itertools.product(x, repeat=3)
                   for b in itertools.product(y, repeat=4))
    assert c.interval == pytest.approx((np.quantile(means, 0.025), np.quantile(means, 0.975)), abs=0.01)


def test_holm_against_its_definition():
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])  # worked by hand: sorted x 4, 3, 2, 1, then monotone
    rng = np.random.default_rng(0)
    for _ in range(200):
        ps = list(rng.uniform(0, 0.1, size=rng.integers(1, 8)))
        m, order = len(ps), sorted(range(len(ps)), key=lambda i: ps[i])
        rejected, k = set(), 0  # step down: reject the k smallest while p_(j) <= alpha / (m - j + 1)
        while k < m and ps[order[k]] <= 0.05 / (m - k):
            rejected.add(order[k])
            k += 1
        assert {i for i, q in enumerate(holm(ps)) if q <= 0.05} == rejected


def test_probability_of_improvement_is_the_normalised_mann_whitney_u():
    x, y = [2.20, 2.0, 2.31, 1.9], [2.0, 2.10, 1.95, 2.05, 2.2]
    u = stats.mannwhitneyu(y, x).statistic  # pairs where y > x, ties one half: x lower is x better
    assert probability_of_improvement(x, y, "minimize") == pytest.approx(u / (4 * 5))
    assert probability_of_improvement(x, y, "maximize") == pytest.approx(stats.mannwhitneyu(x, y).statistic / 20)


def _simulated_power(effect: float, sd: float, n: int, alpha: float, sims: int = 20000) -> float:
    rng = np.random.default_rng(1)
    d = rng.normal(effect, sd, size=(sims, n))  # paired differences
    t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
    return float(np.mean(np.abs(t) > stats.t.ppf(1 - alpha / 2, n - 1)))


def test_seeds_needed_gives_eighty_percent_power_by_simulation():
    x, y = np.array([1.00, 1.30, 1.15]), np.array([1.0, 1.0, 1.0])  # differences 0, 0.3, 0.15: mean 0.15, sd 0.15
    n = seeds_needed(x, y, paired=True, alpha=0.05)
    assert n is not None and n > 3
    assert _simulated_power(0.15, 0.15, n, 0.05) >= 0.79  # Monte Carlo error about 0.003
    assert _simulated_power(0.15, 0.15, n - 1, 0.05) < 0.81


def test_verdicts_with_holm_across_rows():
    clear = {0: 2.50, 1: 2.61, 2: 2.55, 3: 2.58}
    better = {0: 1.60, 1: 1.71, 2: 1.58, 3: 1.66}
    noise = {0: 2.01, 1: 2.08, 2: 1.97, 3: 2.06}
    found = compare_all({"worse": clear, "better": better, "noise": noise}, BASE, "minimize")
    assert found["worse"].verdict == WORSE and found["better"].verdict == BETTER
    assert found["noise"].verdict == UNRESOLVED and found["noise"].seeds_needed is not None
    names = ["worse", "better", "noise"]
    assert [found[n].p_holm for n in names] == pytest.approx(holm([found[n].p for n in names]))
    maximize = compare_all({"worse": clear}, BASE, "maximize")
    assert maximize["worse"].verdict == BETTER  # a higher value is better when the goal is to maximize


def test_a_row_significant_alone_is_not_once_corrected_for_many_rows():
    borderline = {0: 2.06, 1: 2.12, 2: 2.02, 3: 2.09}  # p ~ 0.02 against the base
    alone = compare_all({"b": borderline}, BASE, "minimize")["b"]
    assert alone.p < 0.05 and alone.verdict == WORSE
    many = compare_all({"b": borderline, **{f"n{i}": BASE for i in range(4)}}, BASE, "minimize")["b"]
    assert many.p_holm > 0.05 and many.verdict == UNRESOLVED


def test_one_seed_is_not_tested_and_gets_no_interval():
    c = compare_all({"v": {0: 2.5}}, {0: 2.0}, "minimize")["v"]
    assert c.verdict == UNTESTED and c.interval is None and c.p is None and c.diff == pytest.approx(0.5)
