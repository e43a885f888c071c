"""Repeated t intervals: one look is the t interval; several looks cover the truth at every look together."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ablate.stats.boundaries import critical_values, marginal
from ablate.stats.design import Design
from tests.stats.conftest import SIMS, mc_se


def _t_paths(rng: np.random.Generator, looks: list[int], sims: int, delta: float = 0.0, sd: float = 1.0):
    """|T_k| = |mean_k - delta| / (s_k / sqrt(n_k)) at each look of ``sims`` fresh paths of iid differences."""
    d = rng.normal(delta, sd, (sims, max(looks)))
    out = []
    for n in looks:
        x = d[:, :n]
        out.append(np.abs(x.mean(1) - delta) / (x.std(1, ddof=1) / np.sqrt(n)))
    return np.stack(out, 1)


def test_one_look_is_the_t_quantile():
    for n, error in ((2, 0.05), (3, 0.0167), (10, 0.005)):
        assert critical_values((n,), (error,)) == pytest.approx((stats.t.ppf(1 - error / 2, n - 1),))
    assert marginal(5, 0.0) == np.inf


@pytest.mark.parametrize("rows", [1, 3, 10])
def test_sequential_boundaries_spend_exactly_the_rows_error(rows):
    """On fresh paths (another generator than the boundaries'), some look's |T| crosses its boundary with the
    probability the design allows the row: 0.05 / rows, within Monte Carlo error and never more."""
    design = Design(rows=rows, first=(0, 1, 2), max_seeds=10)
    looks = design.looks(10)
    c = np.array(critical_values(tuple(looks), tuple(design.spent(n) for n in looks)))
    sims = 200_000
    crossed = np.mean((_t_paths(np.random.default_rng(rows), looks, sims) > c).any(1))
    target = design.row_alpha
    assert crossed <= target + 3 * mc_se(target, sims)
    assert crossed >= target * 0.85  # the marginal fall-back overspends nothing and wastes little


def test_coverage_at_every_look_holds_for_any_true_difference_and_spread():
    """T is pivotal: the same boundaries cover Δ = 0.3 with σ = 2 as Δ = 0 with σ = 1."""
    design = Design(rows=2, first=(0, 1, 2), max_seeds=8)
    looks = design.looks(8)
    c = np.array(critical_values(tuple(looks), tuple(design.spent(n) for n in looks)))
    missed = np.mean((_t_paths(np.random.default_rng(7), looks, SIMS, delta=0.3, sd=2.0) > c).any(1))
    assert missed <= design.row_alpha + 3 * mc_se(design.row_alpha)


def test_a_look_that_spends_nothing_cannot_reject_and_bad_looks_are_refused():
    assert critical_values((3, 4), (0.01, 0.01))[1] == np.inf
    with pytest.raises(ValueError, match="increasing"):
        critical_values((4, 4), (0.01, 0.02))
    with pytest.raises(ValueError, match="non-decreasing"):
        critical_values((3, 4), (0.02, 0.01))
