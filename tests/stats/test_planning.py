"""Planning numbers, checked for what they promise: the detectable Δ really has 80% power in at least 90% of
sweeps (whatever the pilot's sd happened to be), and the seeds a margin needs really decide it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.stats import planning
from ablate.stats import verdict as V
from ablate.stats.design import Design, Margin
from ablate.stats.judge import judge_paired


def _power_by_simulation(effect: float, sd: float, n: int, crit: float, sims: int = 40_000, seed: int = 0) -> float:
    d = np.random.default_rng(seed).normal(effect, sd, (sims, n))
    t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
    return float(np.mean(np.abs(t) > crit))


@pytest.mark.parametrize("nc, df, crit", [(3.0, 4, 2.776), (0.5, 2, 4.3), (60.0, 2, 3.0), (250.0, 9, 4.0),
                                         (8.11966631, 2, 4.302652729749462)])  # scipy's nct.cdf(-crit) is NaN here
def test_power_is_the_noncentral_t_tail_and_never_nan(nc, df, crit):
    n = df + 1
    sim = _power_by_simulation(nc / math.sqrt(n), 1.0, n, crit)
    assert planning.power(nc, df, crit) == pytest.approx(sim, abs=0.01)


@pytest.mark.parametrize("n, rows", [(3, 1), (5, 3), (10, 5)])
def test_the_detectable_difference_has_eighty_percent_power_in_ninety_percent_of_sweeps(n, rows):
    """Pilots of n paired seeds with true sd 1: each pilot's detectable Δ (its sd at the 90% upper bound) is
    detected with at least 80% true power (computed with the true sd) in at least 90% of pilots."""
    rng = np.random.default_rng(n)
    crit = stats.t.ppf(1 - 0.05 / rows / 2, n - 1)
    sds = rng.normal(0, 1, (4000, n)).std(1, ddof=1)
    mde = np.array([planning.detectable(s / math.sqrt(n), n - 1, crit) for s in sds])
    nc = mde * math.sqrt(n)  # the true noncentrality at the detectable Δ: the true sd is 1
    true_power = stats.nct.sf(crit, n - 1, nc) + stats.nct.sf(crit, n - 1, -nc)  # nct.cdf(-crit) can be NaN
    assert np.mean(true_power >= 0.8) >= 0.9 - 0.015
    assert np.mean(true_power >= 0.8) <= 0.93  # an upper bound at 90%, not a cautious guess


@pytest.mark.parametrize("sd, margin", [(1.0, 1.5), (0.05, 0.04)])
def test_seeds_for_a_margin_decide_it_with_eighty_percent_power(sd, margin):
    """With the seeds it asks for, a fixed design finds a true Δ = margin worse and a true Δ = 0 equivalent, each
    in at least 80% of simulated sweeps; one seed fewer misses one of the two."""
    rows = 2
    n = planning.seeds_for_margin(sd, margin, 0.05 / rows)
    design = Design(rows=rows, margin=Margin(margin))

    def rates(k: int) -> tuple[float, float]:
        rng = np.random.default_rng(k)
        zero = judge_paired(rng.normal(0, sd, (20_000, k)), np.zeros((20_000, k)), design, "minimize")
        at = judge_paired(rng.normal(margin, sd, (20_000, k)), np.zeros((20_000, k)), design, "minimize")
        return np.mean(zero.verdict == V.EQUIVALENT), np.mean(at.verdict == V.WORSE)

    assert min(rates(n)) >= 0.8 - 0.01
    assert min(rates(n - 1)) < 0.8 + 0.01


def test_more_than_a_thousand_seeds_is_said_not_left_blank():
    assert planning.seeds_for_margin(10.0, 0.01, 0.05) is None  # shown as ">1000"
    assert planning.MAX_PLANNED == 1000
