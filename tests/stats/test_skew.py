"""Skewed per-seed differences: G1 against scipy, the exact sign-flip test against brute force and for what it means
(exact under any symmetric null), the skew flag's rate on normal differences and on skewed ones, and the report's
note."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from ablate.report import build_report, format_markdown, format_terminal
from ablate.report.html import render_html
from ablate.stats import skew
from ablate.stats.design import Design
from tests.report.test_verdicts import make
from tests.stats.conftest import SIMS, mc_se


def test_skewness_is_scipys_adjusted_g1_over_the_finite_values():
    rng = np.random.default_rng(1)
    d = rng.lognormal(0, 1, (50, 7))
    assert np.allclose(skew.skewness(d), stats.skew(d, axis=1, bias=False))
    with_nan = d.copy()
    with_nan[:, 2] = np.nan
    assert np.allclose(skew.skewness(with_nan), stats.skew(np.delete(d, 2, axis=1), axis=1, bias=False))
    assert np.isnan(skew.skewness(np.array([[1.0, 2.0]]))[0])  # fewer than 3 values
    assert np.isnan(skew.skewness(np.array([[0.3, 0.3, 0.3, 0.3]]))[0])  # no spread


def _brute_sign_flip(d: list[float]) -> float:
    observed = abs(sum(d))
    sums = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d))]
    return sum(s >= observed - 1e-12 for s in sums) / len(sums)


@pytest.mark.parametrize("d", [[0.1, 0.2, 0.3], [1.0, -2.0, 3.0, 0.5], [0.01, 0.012, 0.011, 0.009, 0.5],
                               [0.2, -0.1, 0.05, 0.3, 0.25, -0.05, 0.4]])
def test_the_sign_flip_p_is_the_share_of_sign_patterns_at_least_as_extreme(d):
    assert skew.sign_flip_p(np.array([d]))[0] == pytest.approx(_brute_sign_flip(d), abs=1e-12)
    scipy_p = stats.permutation_test((np.array(d),), np.mean, permutation_type="samples", n_resamples=np.inf,
                                     alternative="two-sided").pvalue
    assert skew.sign_flip_p(np.array([d]))[0] == pytest.approx(scipy_p, abs=1e-12)


@pytest.mark.parametrize("draw", ["laplace", "t3", "symmetric mixture"])
def test_the_sign_flip_test_is_exact_under_any_symmetric_null(draw):
    """20,000 tables of 8 seeds, differences symmetric about 0 but far from normal: P(p <= a) <= a at every
    attainable a (the test is exact, so within Monte Carlo error of a itself)."""
    rng = np.random.default_rng(8)
    d = {"laplace": rng.laplace(0, 1, (SIMS, 8)), "t3": rng.standard_t(3, (SIMS, 8)),
         "symmetric mixture": rng.normal(0, 1, (SIMS, 8)) * rng.choice([0.1, 5.0], (SIMS, 8))}[draw]
    p = skew.sign_flip_p(d)
    for a in (2 / 256, 8 / 256, 16 / 256, 32 / 256):
        assert np.mean(p <= a + 1e-12) <= a + 3 * mc_se(a)


@pytest.mark.parametrize("n", [5, 8, 12])
def test_normal_differences_are_flagged_in_about_one_percent_of_sweeps(n):
    rng = np.random.default_rng(n)
    flagged = np.abs(skew.skewness(rng.normal(0.3, 2.0, (SIMS, n)))) > skew.threshold(n)
    assert 0.01 - 3 * mc_se(0.01) <= flagged.mean() <= 0.01 + 3 * mc_se(0.01)


@pytest.mark.parametrize("n, at_least", [(3, 0.01), (10, 0.25), (20, 0.6)])
def test_strongly_skewed_differences_are_flagged_more_often_with_more_seeds(n, at_least):
    """Lognormal differences (sigma 1), measured: flagged in 0.017 of sweeps at 3 seeds (where G1 cannot exceed
    sqrt(3) and normal differences come close to it too: no test sees skew in three values), 0.32 at 10, 0.70 at
    20; normal differences in 0.01 at every count."""
    rng = np.random.default_rng(n)
    g1 = np.abs(skew.skewness(rng.lognormal(0, 1, (SIMS, n))))
    assert g1.max() <= np.sqrt(n) + 1e-9  # G1's bound: g1 <= (n - 2) / sqrt(n - 1), so G1 <= sqrt(n)
    assert np.mean(g1 > skew.threshold(n)) > at_least


def test_the_report_says_when_a_rows_differences_are_skewed(tmp_path):
    """Eight seeds moved by about +0.01 and one by +0.5: G1 near 2.8, flagged, with the exact sign-flip p (every
    difference positive: 2 / 2^8 = 0.0078 before the correction over the family of 1)."""
    base = [(s, 2.0 + 0.05 * s) for s in range(8)]
    moved = [0.010, 0.012, 0.011, 0.009, 0.010, 0.013, 0.011, 0.5]
    report = build_report(make(tmp_path, {"base": base, "v": [(s, b + m) for (s, b), m in zip(base, moved)]},
                               design=Design(rows=1)))
    c = next(r for r in report.variants if r.name == "v").comparison
    assert c.skewed and c.skew == pytest.approx(stats.skew(moved, bias=False))
    assert c.sign_flip_p == pytest.approx(2 / 2**8)
    for text in (format_terminal(report), format_markdown(report), render_html(report)):
        assert "per-seed differences strongly skewed (G1 = +2.8" in text and "sign-flip" in text
