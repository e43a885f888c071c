"""A report's rows against its base: pairing on the shared seeds, the adjusted p-value and the interval saying the
same thing, seeds better, and rows that cannot disturb each other."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.stats.compare import compare
from ablate.stats.design import Design
from ablate.stats.factorial import SIMPLE, Contrast, judge

BASE = {0: 2.00, 1: 2.10, 2: 1.95, 3: 2.05, 4: 2.02}


def test_a_fixed_designs_p_is_the_t_tests_scaled_by_the_rows():
    row = {0: 2.06, 1: 2.12, 2: 2.02, 3: 2.09, 4: 2.07}
    c = compare(row, BASE, Design(rows=4), "minimize")
    seeds = sorted(BASE)
    p = stats.ttest_rel([row[s] for s in seeds], [BASE[s] for s in seeds]).pvalue
    assert c.p == pytest.approx(min(1.0, 4 * p), rel=1e-9) and c.paired and c.n == 5


@pytest.mark.parametrize("design", [Design(rows=3), Design(rows=3, first=(0, 1, 2), max_seeds=6)],
                         ids=["fixed", "sequential"])
def test_p_below_alpha_exactly_when_the_interval_excludes_zero(design):
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(3, 7))
        base = {s: float(v) for s, v in enumerate(rng.normal(0, 1, n))}
        row = {s: base[s] + float(rng.normal(rng.choice([0.0, 1.5]), 0.5)) for s in range(n)}
        c = compare(row, base, design, "minimize")
        excludes = c.interval[0] > 0 or c.interval[1] < 0
        assert (c.p <= design.alpha) == excludes, (row, base, c)


def test_pairs_are_the_seeds_both_sides_ended_and_the_table_says_how_many():
    row = {0: 2.1, 1: 2.25, 2: 2.05, 3: 2.17, 4: 2.12}
    base = {s: v for s, v in BASE.items() if s != 4}  # the base's seed 4 is still running
    c = compare(row, base, Design(rows=1), "minimize")
    assert c.paired and (c.n, c.shared, c.ended) == (4, 4, 5)
    d = [row[s] - base[s] for s in range(4)]
    assert c.diff == pytest.approx(np.mean(d)) and c.diff == pytest.approx(sum(c.interval) / 2)
    ci = stats.ttest_rel([row[s] for s in range(4)], [base[s] for s in range(4)]).confidence_interval(0.95)
    assert c.interval == pytest.approx((ci.low, ci.high), rel=1e-12)  # paired on the 4 shared seeds, one row


def test_fewer_than_two_shared_seeds_fall_back_to_unpaired():
    c = compare({10: 2.4, 11: 2.6, 12: 2.5}, BASE, Design(rows=1), "minimize")
    assert not c.paired and (c.n, c.m) == (3, 5)
    u = stats.mannwhitneyu(list(BASE.values()), [2.4, 2.6, 2.5]).statistic  # pairs where the base is higher
    assert c.better == f"{u / 15:.2f}"


def test_seeds_better_counts_pairs_and_needs_two_runs():
    c = compare({0: 1.9, 1: 2.2, 2: 1.9}, {0: 2.0, 1: 2.1, 2: 2.0}, Design(), "minimize")
    assert c.better == "2/3"
    assert compare({0: 1.9}, {0: 2.0}, Design(), "minimize").better is None


def test_a_nan_in_one_row_changes_no_other_row():
    """Each row judged against the base as the report and a sequential design judge it (one simple contrast each)."""
    other = {0: 2.3, 1: 2.35, 2: 2.28, 3: 2.4, 4: 2.31}

    def rows(broken: dict[int, float]) -> dict[str, object]:
        ended = {"base": BASE, "other": other, "broken": broken}
        return {v: judge(Contrast(SIMPLE, f"{v} vs base", ((v, 1.0),), (("base", 1.0),), "base", row=v), ended,
                         Design(rows=2), "minimize") for v in ("other", "broken")}

    alone, broken = rows({0: 2.0, 1: 2.1}), rows({0: math.nan, 1: 2.1})
    assert alone["other"] == broken["other"] and broken["broken"].failed == (1, 2, 0, 5)  # unpaired: every base run


def test_a_sequential_design_judges_only_complete_looks():
    """Seed 4 of the row ended while seed 3 still runs: the look at 4 seeds is not complete, the row is judged at 3."""
    design = Design(rows=1, first=(0, 1, 2), max_seeds=6)
    row = {0: 2.1, 1: 2.25, 2: 2.05, 4: 2.2}
    c = compare(row, BASE, design, "minimize")
    assert c.look == 3 and c.n == 3


@pytest.mark.parametrize("design", [Design(), Design(first=(0, 1, 2), max_seeds=5)], ids=["fixed", "sequential"])
def test_a_row_without_ended_runs_is_too_few_not_a_crash(design):
    assert compare({}, BASE, design, "minimize").verdict == "too few seeds"
    assert compare({0: 2.0}, {}, design, "minimize").verdict == "too few seeds"
