"""Every column of a sequential sweep's row reads the seeds its verdict read: a seed started ahead of a look, which
no verdict reads, is in no column of its row (mean, sd, runs, Δ, pairs, tokens/s) and is listed apart in every format.

The sweep is fabricated (no training): ``far`` is decided *worse* at its first look (3 seeds) and has a fourth seed
that ended ahead of a look it never needed; ``close`` goes on to the budget (5 seeds), so the base reads 5 seeds."""

from __future__ import annotations

import csv
import html
import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ablate.report import build_report
from ablate.report.columns import timed_names
from ablate.report.records import table_columns, table_records, to_csv
from ablate.report.render import format_markdown, format_terminal
from ablate.stats.compare import compare
from ablate.stats.design import Design, Margin
from tests.report.conftest import write_metrics

_noise = np.random.default_rng(3).normal(0.0, 1.0, size=(3, 5))
VALUES = {  # val/loss by row and seed
    "base": 2.0 + 0.05 * _noise[0],
    "far": 3.0 + 0.05 * _noise[0] + 0.02 * _noise[1],
    "close": 2.02 + 0.05 * _noise[0] + 0.2 * _noise[2],
}
SEEDS = {"base": 5, "far": 4, "close": 5}  # far: seed 3 ran ahead of a look that never came
DESIGN = Design(margin=Margin(0.01), first=(0, 1, 2), max_seeds=5)


def _sweep(root: Path) -> Path:
    sweep_dir, runs = root / "seq", []
    for variant, n in SEEDS.items():
        for seed in range(n):
            rid = f"{variant}-s{seed}"
            value = float(VALUES[variant][seed])
            runs.append({"id": rid, "variant": variant, "seed": seed, "varied": {"model.dropout": variant},
                         "run_dir": f"runs/{rid}", "parameters": 1000})
            write_metrics(sweep_dir / "runs" / rid, [value + 1.0, value])
            result = {"status": "finished", "step": 200, "parameters": 1000, "tokens_per_s": 1000.0 + 10 * seed,
                      "wall_time_s": 10.0 + seed, "final": {"val/loss": value}, "best": {"val/loss": value}}
            (sweep_dir / "runs" / rid / "result.json").write_text(json.dumps(result))
    plan = {"name": "seq", "metric": {"name": "val/loss", "goal": "minimize"}, "base_variant": "base",
            "varied_keys": ["model.dropout"], "runs": runs, "design": DESIGN.to_json()}
    (sweep_dir / "plan.json").write_text(json.dumps(plan))
    return sweep_dir


@pytest.fixture
def report(tmp_path):
    return build_report(_sweep(tmp_path))


def _csv(report) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(io.StringIO(to_csv(table_columns(report), table_records(report))))
    return {r["variant"]: r for r in rows}


def test_the_design_decides_far_at_three_seeds_and_leaves_close_undecided_at_the_budget(report):
    rows = {r.name: r for r in report.variants}
    assert (rows["far"].comparison.verdict, rows["far"].comparison.decided_at) == ("worse", 3)
    assert rows["close"].comparison.decided_at is None and rows["close"].comparison.look == 5


def test_every_column_of_a_row_reads_the_seeds_its_verdict_read_and_the_seed_ahead_is_apart(report):
    rows, table = {r.name: r for r in report.variants}, _csv(report)
    read = {"base": 5, "far": 3, "close": 5}  # far: its deciding look; close: the budget; the base: the most of both
    for name, n in read.items():
        row, values = rows[name], VALUES[name][:n]
        mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
        assert row.metrics["val/loss"].mean == pytest.approx(mean, abs=1e-12)
        assert row.metrics["val/loss"].std == pytest.approx(sd, abs=1e-12)
        assert (row.metrics["val/loss"].n, row.n_runs, row.n_finished) == (n, n, n)
        assert row.tokens_per_s.mean == pytest.approx(1000.0 + 10 * np.mean(range(n)))
        assert float(table[name]["val/loss_mean"]) == pytest.approx(mean, abs=1e-12)
        assert float(table[name]["val/loss_std"]) == pytest.approx(sd, abs=1e-12)
        assert (table[name]["val/loss_n"], table[name]["runs"], table[name]["finished"]) == (str(n),) * 3
        if name == "base":
            continue
        d = VALUES[name][:n] - VALUES["base"][:n]  # the pairs its verdict read
        c = row.comparison
        assert c.diff == pytest.approx(float(np.mean(d)), abs=1e-12) and row.delta == c.diff
        assert float(table[name]["val/loss_delta"]) == pytest.approx(float(np.mean(d)), abs=1e-12)
        assert (c.n, c.shared, c.ended, table[name]["pairs"]) == (n, n, n, str(n))
        assert c.better == f"{int(np.sum(d < 0))}/{n}"
        alone = compare(dict(enumerate(VALUES[name][:n])), dict(enumerate(VALUES["base"][:n])),
                        replace(DESIGN, rows=2), "minimize")  # the comparison of the read seeds alone
        assert (c.interval, c.p, c.verdict, c.decided_at) == (alone.interval, alone.p, alone.verdict, alone.decided_at)
    assert [run.seed for run in rows["far"].ahead] == [3] and not rows["base"].ahead and not rows["close"].ahead
    assert {name: table[name]["ahead_not_read"] for name in read} == {"base": "0", "far": "1", "close": "0"}


def test_the_seed_ahead_is_named_in_every_format(report, tmp_path):
    from ablate.report.html import render_html

    note = "ahead, not read: far seed 3 (1 run that ended beyond the seeds their row's verdicts read"
    flat = lambda text: " ".join(html.unescape(text).split())  # noqa: E731  (the terminal wraps its prose)
    for text in (format_terminal(report), format_terminal(report, wide=True), format_markdown(report),
                 render_html(report)):
        assert note in flat(text)
    wide = format_terminal(report, wide=True)
    assert "ahead, not read" in next(line for line in wide.splitlines() if line.startswith("variant"))  # --wide
    assert "ahead_not_read" in timed_names(report)  # it depends on how the workers were timed, not on the design


def test_a_fixed_design_reads_every_seed(tmp_path):
    sweep_dir = _sweep(tmp_path)
    plan = json.loads((sweep_dir / "plan.json").read_text())
    (sweep_dir / "plan.json").write_text(json.dumps({**plan, "design": Design(margin=Margin(0.01)).to_json()}))
    rows = {r.name: r for r in build_report(sweep_dir).variants}
    assert rows["far"].n_runs == 4 and not rows["far"].ahead
    assert rows["far"].comparison.n == 4 and rows["far"].comparison.ended == 4
