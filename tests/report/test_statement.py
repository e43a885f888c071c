"""An interval inside the margin that also excludes 0 has found a difference: every format says both ("equivalent
(worse, by less than the margin)"), for rows, effects, ladder steps and the CSV files alike."""

from __future__ import annotations

import html

import numpy as np
import pytest

from ablate.report import build_report, format_markdown, format_terminal, write_report
from ablate.report.effects import effect_cells
from ablate.report.html import render_html
from ablate.stats import verdict as V
from ablate.stats.compare import compare
from ablate.stats.design import Design, Margin
from ablate.stats.judge import judge_paired
from tests.report import test_factorial as factorial
from tests.report.test_verdicts import make
from tests.stats.conftest import SIMS, sweep

SMALL_WORSE = "equivalent (worse, by less than the margin)"
BASE = {s: 2.0 + 0.05 * ((s * 7) % 5) for s in range(6)}
ROW = {s: BASE[s] + 0.0465 + 0.004 * ((s * 3) % 4 - 1.5) for s in range(6)}


def test_the_issues_interval_reads_equivalent_and_worse():
    """An interval near [+0.034, +0.059] with margin 0.06: the adjusted p is under 0.05, so "equivalent" alone would
    hide a difference the interval proves."""
    c = compare(ROW, BASE, Design(rows=1, margin=Margin(0.06)), "minimize")
    assert 0 < c.interval[0] < c.interval[1] < 0.06 and c.p < 0.05
    assert c.verdict == "equivalent" and c.detail == "worse, by less than the margin" and c.statement == SMALL_WORSE
    higher = compare(ROW, BASE, Design(rows=1, margin=Margin(0.06)), "maximize")
    assert higher.statement == "equivalent (better, by less than the margin)"


def test_every_format_says_both(tmp_path):
    values = {"base": list(BASE.items()), "w": list(ROW.items())}
    report = build_report(make(tmp_path, values, design=Design(margin=Margin(0.06))))
    assert SMALL_WORSE in format_terminal(report) and SMALL_WORSE in format_markdown(report)
    assert SMALL_WORSE in render_html(report)
    paths = write_report(report, tmp_path / "out")
    assert SMALL_WORSE in paths["table.csv"].read_text()


def test_an_effect_inside_the_margin_that_excludes_0_says_so(tmp_path):
    """A 2x2 whose warmup effect is a steady +0.03 at both rows, margin 0.1: the main effect and both simple effects
    read "equivalent (worse, ...)", in the effects table and effects.csv; no interaction says it is a small one
    only when its interval excludes 0."""
    rng = np.random.default_rng(5)
    shared = rng.normal(0, 0.3, 6)
    means = {("post", 100): 0.0, ("pre", 100): -0.01, ("post", 0): 0.03, ("pre", 0): 0.02}
    values = {cell: list(3.0 + m + shared + rng.normal(0, 0.002, 6)) for cell, m in means.items()}
    report = build_report(factorial.make(tmp_path, values, factorial.FACTORS, design=Design(margin=Margin(0.1))))
    main = factorial.effect(report, "warmup=0, averaged over the rows")
    assert main.comparison.statement == SMALL_WORSE
    assert SMALL_WORSE in effect_cells(report, main)
    interaction = factorial.effect(report, "pre x warmup=0").comparison
    assert interaction.verdict == "equivalent"
    says = effect_cells(report, factorial.effect(report, "pre x warmup=0"))[5]
    assert says.startswith("no interaction beyond ±0.1") and (("a small one" in says) == bool(interaction.detail))
    paths = write_report(report, tmp_path / "out")
    assert SMALL_WORSE in paths["effects.csv"].read_text()


def test_a_statement_names_a_direction_exactly_when_the_interval_excludes_0():
    """20,000 simulated rows with a margin, true Δ spread across the margin: a row's statement says better or worse
    (as its verdict or beside *equivalent*) if and only if its interval excludes 0, with the interval's sign."""
    rng = np.random.default_rng(31)
    deltas = rng.uniform(-1.6, 1.6, SIMS)
    base, (row,) = sweep(rng, rows=1, seeds=10, delta=0.0)
    row = row + deltas[:, None]
    j = judge_paired(row, base, Design(rows=3, margin=Margin(1.5)), "minimize")
    details = [V.qualifier(code, lo, hi, "minimize") for code, lo, hi in zip(j.verdict, j.lo, j.hi)]
    says_worse = (j.verdict == V.WORSE) | np.array([d.startswith("worse") for d in details])
    says_better = (j.verdict == V.BETTER) | np.array([d.startswith("better") for d in details])
    assert np.array_equal(says_worse, j.lo > 0) and np.array_equal(says_better, j.hi < 0)
    assert np.sum((j.verdict == V.EQUIVALENT) & says_worse) > 50  # the case happens, and is said


@pytest.mark.parametrize("code", [V.BETTER, V.WORSE, V.NOT_WORSE, V.NOT_BETTER, V.UNDECIDED])
def test_only_equivalent_takes_a_qualifier(code):
    assert V.qualifier(code, 0.01, 0.02, "minimize") == ""


def test_a_row_that_fails_more_and_whose_survivors_are_worse_says_worse_in_every_format(tmp_path):
    """The issue's example through the report: the row failed 2 of 10 runs, the base none, its survivors are worse
    inside the margin. Every format says *worse* with the failure note, and the reason under the table."""
    base = [(s, 2.0 + 0.01 * ((s * 7) % 5)) for s in range(10)]
    row = [(s, "failed" if s in (3, 7) else v + 0.02 + 0.004 * ((s * 3) % 4 - 1.5)) for s, v in base]
    report = build_report(make(tmp_path, {"base": base, "w": row}, design=Design(margin=Margin(0.06))))
    c = next(r for r in report.variants if r.name == "w").comparison
    assert c.verdict == "worse" and 0 < c.interval[0] < c.interval[1] < 0.06
    said = "worse (fails more often)"
    for text in (format_terminal(report), format_markdown(report), render_html(report)):
        text = html.unescape(text)
        assert said in text and "2/10 failed vs the base's 0/10: its survivors are its luckier seeds" in text
    assert ",worse," in write_report(report, tmp_path / "out")["table.csv"].read_text()
