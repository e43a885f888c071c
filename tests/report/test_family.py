"""The family the correction covers holds each distinct contrast once, and its size in the report's header counts
them: a comparison that two designs' vocabularies both name ("(lr=1, w=0) vs base" and "w=0 at lr=1") is one test,
paying for its error once."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.report import build_report, format_markdown, format_terminal
from ablate.stats.factorial import INTERACTION, MAIN, SIMPLE, WITHIN, Factor, Factorial
from ablate.stats.design import Design
from ablate.stats.judge import judge_paired
from tests.report.test_factorial import make, paired_interval, row
from tests.stats.conftest import mc_se

LR, W = "optimizer.lr", "train.schedule_args.warmup"
TWO_PARAMETERS = [{"name": LR, "levels": [1, 2]}, {"name": W, "levels": [100, 0]}]


def _cells() -> dict[str, dict]:
    return {f"lr={a}, warmup={b}": {LR: a, W: b} for a in (1, 2) for b in (100, 0)}


def test_two_swept_parameters_without_rows_test_seven_distinct_contrasts_not_eight():
    """Three variants against the base, two main effects, two simple effects, one interaction: eight members, but
    "warmup=0 at lr=1" has the weights of "(lr=1, warmup=0) vs base"; it is tested once."""
    factorial = Factorial([Factor(LR, (1, 2)), Factor(W, (100, 0))], _cells(), "lr=1, warmup=100")
    assert len(factorial.contrasts) == 8
    family = factorial.family()
    assert sorted(c.kind for c in family) == sorted([SIMPLE] * 3 + [MAIN] * 2 + [WITHIN, INTERACTION])
    keys = [tuple(sorted(c.weights().items())) for c in family]
    assert len(set(keys)) == len(keys) == 7  # no two members of the family are one test
    (twin,) = [c for c in factorial.contrasts if factorial.same[c] is not c]
    assert twin.kind == WITHIN and twin.label == "warmup=0 at lr=1"
    assert factorial.same[twin].kind == SIMPLE and factorial.same[twin].weights() == twin.weights()


def test_the_report_counts_distinct_contrasts_and_shows_the_twin_with_its_one_judgement(tmp_path):
    rng = np.random.default_rng(3)
    shared = rng.normal(0, 0.3, 6)
    means = {(1, 100): 0.0, (1, 0): 0.2, (2, 100): -0.1, (2, 0): 0.05}
    values = {cell: list(3.0 + m + shared + rng.normal(0, 0.02, 6)) for cell, m in means.items()}
    report = build_report(make(tmp_path, values, TWO_PARAMETERS))
    assert report.design.rows == 7
    assert "simultaneous 95% over 7 rows" in format_terminal(report) + format_markdown(report)
    simple = row(report, "lr=1, warmup=0").comparison
    twin = next(e for e in report.effects if e.contrast.label == "warmup=0 at lr=1").comparison
    assert twin is simple
    d = np.array(values[1, 0]) - np.array(values[1, 100])
    assert simple.interval == pytest.approx(paired_interval(d, 1 - 0.05 / 7))  # its share of 7, not of 8


def test_a_row_factor_of_one_level_is_no_factor(tmp_path):
    """A sweep whose rows list only the base, crossed with one parameter: each value is compared with the first, as
    a one-parameter sweep does, not once as a main effect and again as a simple effect (and never not at all)."""
    factors = [{"name": "row", "levels": ["base"]}, {"name": W, "levels": [100, 0, 50]}]
    rng = np.random.default_rng(4)
    shared = rng.normal(0, 0.3, 6)
    values = {("base", w): list(3.0 + 0.1 * i + shared + rng.normal(0, 0.02, 6)) for i, w in enumerate((100, 0, 50))}
    report = build_report(make(tmp_path, values, factors))
    assert report.design.rows == 2 and report.effects == ()
    for w in (0, 50):
        c = row(report, f"base, warmup={w}").comparison
        assert c is not None and c.verdict == "worse"


@pytest.mark.parametrize("seeds", [3, 5])
def test_the_distinct_family_still_covers_together(seeds):
    """Each distinct contrast at 0.05 / 7 instead of 0.05 / 8: the seven intervals still cover their true values
    together in at least 95% of simulated null and non-null sweeps."""
    factorial = Factorial([Factor(LR, (1, 2)), Factor(W, (100, 0))], _cells(), "lr=1, warmup=100")
    truth = {"lr=1, warmup=100": 0.0, "lr=1, warmup=0": 0.0, "lr=2, warmup=100": 0.3, "lr=2, warmup=0": -0.2}
    family = factorial.family()
    rng, sims = np.random.default_rng(seeds), 20_000
    shared = rng.normal(0, 1.0, (sims, seeds))
    y = {cell: mean + shared + rng.normal(0, 0.5, (sims, seeds)) for cell, mean in truth.items()}
    covered = np.ones(sims, bool)
    for c in family:
        w = c.weights()
        true = sum(w[v] * truth[v] for v in w)
        x, base = sum(wt * y[v] for v, wt in c.plus), sum(wt * y[v] for v, wt in c.minus)
        j = judge_paired(x, base, Design(rows=len(family)), "minimize")
        covered &= (j.lo <= true) & (true <= j.hi)
    assert covered.mean() >= 0.95 - 3 * mc_se(0.95)
