"""The report's verdict columns on sweep directories with known values: diverged runs counted as failed, duplicate
seeds averaged before Δ, the family's size, the design read from plan.json, every format saying the same."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ablate.report import build_report, format_markdown, format_terminal
from ablate.report.text import display_cells, display_headers
from ablate.stats.design import Design, Margin


def make(root: Path, values: dict[str, list[tuple[int, float | str]]], *, design: Design | None = None,
         leaks: tuple[str, ...] = ()) -> Path:
    """A sweep whose runs ended with these final val/loss values; "failed" for a run that raised, "running"."""
    runs = []
    for variant, seeds in values.items():
        for i, (seed, value) in enumerate(seeds):
            rid = f"{variant}-{seed}-{i}"
            runs.append({"id": rid, "variant": variant, "seed": seed, "varied": {}, "run_dir": f"runs/{rid}",
                         "leaks_labels": variant in leaks})
            run_dir = root / "runs" / rid
            run_dir.mkdir(parents=True)
            if value == "failed":
                result = {"status": "failed", "error": "RuntimeError: boom"}
            elif value == "running":
                result = {"status": "running"}
            else:
                result = {"status": "finished", "final": {"val/loss": value}}
            (run_dir / "result.json").write_text(json.dumps(result))  # NaN and inf as Python's json writes them
    plan = {"name": "v", "metric": {"name": "val/loss", "goal": "minimize"}, "base_variant": "base", "runs": runs}
    if design is not None:
        plan["design"] = design.to_json()
    (root / "plan.json").write_text(json.dumps(plan))
    return root


def row(report, name):
    return next(r for r in report.variants if r.name == name)


def cells(report, name):
    return dict(zip(display_headers(report), display_cells(report, row(report, name))))


BASE = [(0, 2.00), (1, 2.10), (2, 1.95), (3, 2.05)]


def test_a_finished_run_with_a_nan_loss_is_a_failed_run(tmp_path):
    report = build_report(make(tmp_path, {"base": BASE, "v": [(0, 2.5), (1, math.nan), (2, 2.6), (3, math.inf)]}))
    v = row(report, "v")
    assert (v.n_finished, v.n_failed) == (2, 2) and v.metrics["val/loss"].n == 2
    assert v.comparison.failed == (2, 4, 0, 4) and "diverged" in v.first_error
    assert cells(report, "v")["failed"].startswith("2/4: val/loss = nan at the end")


def test_duplicate_seeds_are_averaged_before_the_difference(tmp_path):
    """Two runs of seed 0 (2.2 and 3.0): one value 2.6 for the seed; Δ, the interval's centre and the verdict all
    come from those values."""
    report = build_report(make(tmp_path, {"base": BASE, "v": [(0, 2.2), (0, 3.0), (1, 2.7), (2, 2.5), (3, 2.6)]}))
    c = row(report, "v").comparison
    d = [2.6 - 2.0, 2.7 - 2.1, 2.5 - 1.95, 2.6 - 2.05]
    assert c.n == 4 and c.diff == pytest.approx(sum(d) / 4) == pytest.approx(sum(c.interval) / 2)
    assert row(report, "v").delta == c.diff and c.verdict == "worse"


def test_the_family_is_every_compared_row_and_leaking_rows_stay_out(tmp_path):
    values = {"base": BASE, "a": [(s, v + 0.5 + 0.01 * s) for s, v in BASE], "b": [(s, v - 0.01 * s) for s, v in BASE],
              "leak": [(s, 0.1) for s, _ in BASE]}
    report = build_report(make(tmp_path, values, leaks=("leak",)))
    assert report.design.rows == 2
    assert row(report, "a").comparison.level == pytest.approx(1 - 0.05 / 2)
    leak = cells(report, "leak")
    assert leak["verdict"] == "not comparable: its mask leaks labels"
    shown = (leak["95% CI (simult.)"], leak["p (adj.)"], leak["seeds better"], leak["detectable Δ"])
    assert shown == ("—", "—", "—", "")
    assert "simultaneous 95% over 2 rows" in format_terminal(report) and "95% CI (simult.)" in format_markdown(report)
    from ablate.report.html import render_html

    assert "Comparisons: simultaneous 95% over 2 rows (Bonferroni: each row 97.50%)" in render_html(report)


def test_the_design_comes_from_the_plan(tmp_path):
    design = Design(alpha=0.1, margin=Margin(0.2), first=(0, 1, 2), max_seeds=6)
    values = {"base": BASE, "v": [(s, v + 0.01 * (1 + s % 2)) for s, v in BASE],  # Δ 0.01, 0.02, 0.01, 0.02
              "w": [(s, v + 0.1 + 0.005 * s) for s, v in BASE]}  # Δ about 0.1: real, yet inside the margin
    report = build_report(make(tmp_path, values, design=design))
    assert cells(report, "w")["verdict"] == "equivalent (worse, by less than the margin)"
    assert report.design.sequential and report.design.margin == Margin(0.2) and report.design.alpha == 0.1
    headers = display_headers(report)
    assert "decided at" in headers and "seeds for ±0.2" in headers
    c = row(report, "v").comparison
    assert c.verdict == "equivalent" and c.decided_at == 3 and cells(report, "v")["decided at"] == "3 seeds"
    assert cells(report, "v")["verdict"] == "equivalent" and c.interval[0] < 0 < c.interval[1]


def test_runs_still_going_make_a_verdict_interim(tmp_path):
    report = build_report(make(tmp_path, {"base": BASE, "v": [(0, 3.0), (1, 3.1), (2, 2.9), (3, "running")]}))
    assert row(report, "v").comparison.interim and cells(report, "v")["verdict"].endswith("(interim)")


def test_undecided_says_the_margin_the_seeds_resolved(tmp_path):
    """'undecided (|Δ| < x)': x is the largest |Δ| the interval allows, from scipy's paired t interval at 95%,
    rounded up at its third significant digit (a bound from above: never below what the interval allows)."""
    import math

    from scipy import stats

    row_values = [(0, 2.05), (1, 2.02), (2, 2.08), (3, 1.99)]
    report = build_report(make(tmp_path, {"base": BASE, "v": row_values}))
    d = [v - b for (_, v), (_, b) in zip(row_values, BASE)]
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    resolved = max(abs(ci.low), abs(ci.high))
    unit = 10.0 ** (math.floor(math.log10(resolved)) - 2)
    assert cells(report, "v")["verdict"] == f"undecided (|Δ| < {math.ceil(resolved / unit) * unit:.3g})"


def test_seeds_for_a_margin_read_as_a_range_or_more_than_a_thousand(tmp_path):
    noisy = [(0, 2.5), (1, 1.7), (2, 2.6), (3, 1.6)]
    report = build_report(make(tmp_path, {"base": BASE, "v": noisy}, design=Design(margin=Margin(1e-4))))
    assert cells(report, "v")["seeds for ±0.0001"] == ">1000"
    wide = build_report(make(tmp_path / "w", {"base": BASE, "v": noisy}, design=Design(margin=Margin(0.3))))
    low, high = cells(wide, "v")["seeds for ±0.3"].split("–")
    assert 2 <= int(low) <= int(high) <= 1000


def test_rows_without_shared_seeds_are_compared_unpaired_with_scipy_s_welch_statistic(tmp_path):
    """3 vs 4 runs on different seeds: Welch's t from scipy, Hsu's min(n, m) - 1 degrees of freedom, Bonferroni over
    the family's 2 rows; the adjusted p is the two-sided t tail times 2, at most 1."""
    from scipy import stats

    other = [(10, 2.5), (11, 2.6), (12, 2.45)]
    values = {"base": BASE, "v": other, "w": [(s, v + 0.01 * s) for s, v in BASE]}
    report = build_report(make(tmp_path, values))
    c = row(report, "v").comparison
    welch = stats.ttest_ind([v for _, v in other], [v for _, v in BASE], equal_var=False)
    assert c.p == pytest.approx(min(1.0, 2 * 2 * stats.t.sf(abs(welch.statistic), df=2)), rel=1e-9)
    assert cells(report, "v")["pairs"] == "3 vs 4 unpaired"
