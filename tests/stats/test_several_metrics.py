"""Every row judged on two metrics (val loss and BLEU, their per-seed differences correlated 0, 0.5 and 0.9): the
family of rows x metrics keeps its error at 5% in a fixed and in a sequential design, under the joint stopping rule
replayed look by look (tests/stats/several.py), and a seed started before its row's look was complete changes nothing
the report says. Figures at 20,000 sweeps: ``benchmarks/verdicts.py --only metrics``."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.stats.design import Design
from ablate.stats.judge import judge_paired
from tests.stats import several as S
from tests.stats.conftest import mc_se

SIMS = 3000  # the Monte Carlo standard error of a 5% rate: 0.004


def test_each_row_and_metric_gets_its_bonferroni_share():
    assert Design(rows=3, metrics=2).row_alpha == pytest.approx(0.05 / 6)
    assert Design(rows=3, metrics=2).judging(S.BLEU).margin == S.BLEU.margin


@pytest.mark.parametrize("design", list(S.designs()))
@pytest.mark.parametrize("rho", S.RHOS)
def test_family_wise_error_over_rows_and_metrics_is_at_most_alpha(rho, design):
    """Three null rows, no margins (some better/worse false), and three rows at 0, +m and -m on both metrics with
    margins (a false *equivalent* at the margin counts too): some statement false in at most 5% of sweeps."""
    rng = np.random.default_rng([7, int(10 * rho), design.startswith("seq")])
    null, _, _ = S.family(rng, SIMS, rho, S.NULL, S.designs()[design], margins=False)
    at_margin, _, _ = S.family(rng, SIMS, rho, S.AT_MARGIN, S.designs()[design])
    assert null <= 0.05 + 3 * mc_se(0.05, SIMS)
    assert at_margin <= 0.05 + 3 * mc_se(0.05, SIMS)


def test_each_metric_at_alpha_over_rows_alone_exceeds_the_stated_error():
    """The naive design (each metric given 0.05 / rows, as if it were the only one) on uncorrelated metrics: about
    1 - 0.95² ≈ 0.10, well over 5%. The test above can tell the two rules apart."""
    naive = S.designs(metrics=1)["fixed 10"]
    error, _, _ = S.family(np.random.default_rng(8), SIMS, 0.0, S.NULL, naive, margins=False)
    assert error > 0.05 + 5 * mc_se(0.05, SIMS)


def test_the_joint_rule_stops_a_row_when_its_last_metric_is_decided_and_keeps_each_metrics_verdict():
    """A row's seeds are its last metric's first deciding look (else max_seeds); each metric's verdict, Δ and
    interval are those of that metric judged alone on every seed (its own first deciding look); so the joint rule
    costs seeds, never verdicts, and it costs at least as many seeds as judging the loss alone."""
    design = S.designs()["sequential 3→10"]
    _, seeds, (base, rows, judged) = S.family(np.random.default_rng(9), SIMS, 0.5, S.AT_MARGIN, design)
    for row, (stop, js) in zip(rows, judged):
        alone = {m.name: judge_paired(row[m.name], base[m.name], design.judging(m), m.goal) for m in S.METRICS}
        decided = np.stack([j.decided_at for j in alone.values()])
        assert np.array_equal(stop, np.where((decided > 0).all(0), decided.max(0), S.MAX_SEEDS))
        for name, j in js.items():
            for field in ("verdict", "diff", "lo", "hi", "look"):
                assert np.array_equal(getattr(j, field), getattr(alone[name], field), equal_nan=True), (name, field)
    _, loss_alone, _ = S.family(np.random.default_rng(9), SIMS, 0.5, S.AT_MARGIN, S.designs(metrics=1)[
        "sequential 3→10"], metrics=(S.LOSS,))
    assert 3 < loss_alone < seeds < S.MAX_SEEDS


def test_speculative_seeds_beyond_a_rows_stop_look_leave_its_verdicts_unchanged():
    """Reading 1-2 more seeds per row than the sequential sweep would have run (seeds started early to fill an idle
    worker) gives the same verdict, Δ and interval on every metric of every sweep, so the same error."""
    differ, readings, spared = S.speculative(np.random.default_rng(10), SIMS, 0.5)
    assert differ == 0
    assert spared > 0.3 * S.ROWS * SIMS  # rows stopped before max_seeds: the check is not vacuous
    assert readings == S.ROWS * SIMS * len(S.METRICS)
