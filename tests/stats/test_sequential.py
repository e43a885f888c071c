"""The sequential design, simulated through the code that runs it (``judge_paired`` replays the looks exactly as the
sweep's queue takes them: a row stops at its first better / worse / equivalent): its family-wise error under that
stopping, what it costs in power against a fixed number of seeds, and why the old "add seeds and look again" rule
was not an option."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.stats import verdict as V
from ablate.stats.design import Design, Margin
from ablate.stats.judge import judge_paired
from tests.stats.claims import false_claims
from tests.stats.conftest import SIMS, mc_se, sweep

FIRST, MAX = (0, 1, 2), 10


def _family_error(rng, deltas, margin, goal="minimize"):
    design = Design(rows=len(deltas), first=FIRST, max_seeds=MAX, margin=None if margin is None else Margin(margin))
    base, rows = sweep(rng, rows=len(deltas), seeds=MAX, delta=deltas)
    wrong = np.zeros(SIMS, bool)
    seeds = np.zeros(SIMS)
    for delta, row in zip(deltas, rows):
        j = judge_paired(row, base, design, goal)
        wrong |= false_claims(j.verdict, delta, goal, margin)
        seeds = np.maximum(seeds, j.look)
    return wrong.mean(), seeds


@pytest.mark.parametrize("margin", [None, 0.5])
def test_family_wise_error_under_sequential_stopping_is_at_most_alpha(margin):
    """Three null rows (and, with a margin, a fourth exactly at it): 20,000 sweeps stopped row by row at their first
    decisive look. Some verdict of the table is false in at most 5% of sweeps (+3 Monte Carlo standard errors)."""
    deltas = [0.0, 0.0, 0.0] + ([margin] if margin else [])
    error, _ = _family_error(np.random.default_rng(1 if margin else 2), deltas, margin)
    assert error <= 0.05 + 3 * mc_se(0.05)


def test_family_wise_error_with_real_effects_beside_the_nulls():
    error, _ = _family_error(np.random.default_rng(3), [0.0, 0.0, 1.0, -2.0], None, goal="maximize")
    assert error <= 0.05 + 3 * mc_se(0.05)


def _fixed_then_look_again(rng, rows=3):
    """The old advice: judge a fixed design at 3 seeds, and while no verdict, add a seed and judge again, up to 10."""
    base, null_rows = sweep(rng, rows=rows, seeds=MAX)
    claimed = np.zeros(SIMS, bool)
    for row in null_rows:
        for n in range(3, MAX + 1):
            fixed = Design(rows=rows)
            claimed |= np.isin(judge_paired(row[:, :n], base[:, :n], fixed, "minimize").verdict, (V.BETTER, V.WORSE))
    return claimed.mean()


def test_adding_seeds_and_looking_again_without_the_design_inflates_the_error():
    """The rule the design replaces, on the same kind of sweeps, ends in a false verdict well over 5% of the time."""
    assert _fixed_then_look_again(np.random.default_rng(4)) > 0.10


def test_what_the_sequential_design_costs_against_a_fixed_design():
    """Against a fixed design that always runs 10 seeds: at an effect of 1.5 sd of the per-seed differences the
    sequential design keeps most of the power; for a large effect it stops after 3-5 seeds instead of 10."""
    rng = np.random.default_rng(5)
    sd_diff = np.sqrt(2 * (1 - 0.8))  # the per-seed differences of sweep()'s default sides
    base, (row,) = sweep(rng, rows=1, seeds=MAX, delta=1.5 * sd_diff)
    fixed = judge_paired(row, base, Design(rows=3), "minimize")
    sequential = judge_paired(row, base, Design(rows=3, first=FIRST, max_seeds=MAX), "minimize")
    power_fixed, power_seq = np.mean(fixed.verdict == V.WORSE), np.mean(sequential.verdict == V.WORSE)
    assert power_seq >= power_fixed - 0.08 and power_seq > 0.8
    base, (large,) = sweep(rng, rows=1, seeds=MAX, delta=5 * sd_diff)
    stops = judge_paired(large, base, Design(rows=3, first=FIRST, max_seeds=MAX), "minimize").decided_at
    assert np.all(stops > 0) and stops.mean() <= 5


def test_a_decided_row_reports_the_look_that_decided_it():
    """Seeds after the deciding look (run by another row's need, or by a later budget) do not change its verdict."""
    design = Design(rows=1, first=FIRST, max_seeds=MAX)
    row = np.array([[3.0, 3.2, 2.9, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    base = np.array([[1.0, 1.1, 0.95, 1.05, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]])
    j = judge_paired(row, base, design, "minimize")
    assert j.verdict[0] == V.WORSE and j.decided_at[0] == j.look[0] == 3
