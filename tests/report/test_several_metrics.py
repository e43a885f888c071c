"""A report that judges every row on two metrics (val/loss, minimize; test/bleu, maximize), like Table 3's PPL and
BLEU columns: each row's Δ, interval and verdict per metric, computed here again from the runs with scipy at the
family's level (rows x metrics, Bonferroni), and the same numbers in every format (terminal, Markdown, HTML, CSV)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.report import badges, build_report, format_markdown, format_terminal
from ablate.report.html import render_html
from ablate.report.records import table_columns, table_records, to_csv
from ablate.stats.design import Design, Judged, Margin

# row -> (Δ val/loss, Δ test/bleu): worse on both, nothing on either, worse loss yet better BLEU
ROWS = {"base": (0.0, 0.0), "h=1": (0.15, -1.5), "h=16": (0.0, 0.05), "N=1": (0.4, 0.6)}
SEEDS = 5
JUDGED = (Judged("val/loss", "minimize", Margin(0.05)), Judged("test/bleu", "maximize", Margin(0.5)))
ALPHA = 0.05


def make(root: Path) -> tuple[Path, dict[str, dict[str, np.ndarray]]]:
    """A finished fixed-design sweep of ROWS at SEEDS seeds; its values by row and metric."""
    rng = np.random.default_rng(3)
    seed_loss, seed_bleu = rng.normal(0, 0.03, SEEDS), rng.normal(0, 0.6, SEEDS)  # same seed, same data order
    sweep, runs, values = root / "sweep", [], {}
    for variant, (d_loss, d_bleu) in ROWS.items():
        loss = 2.0 + d_loss + seed_loss + rng.normal(0, 0.01, SEEDS)
        bleu = 30 + d_bleu + seed_bleu + rng.normal(0, 0.2, SEEDS)
        values[variant] = {"val/loss": loss, "test/bleu": bleu}
        for s in range(SEEDS):
            rid = f"{variant.replace('=', '')}-s{s}"
            runs.append({"id": rid, "variant": variant, "seed": s, "varied": {"row": variant},
                         "run_dir": f"runs/{rid}", "parameters": 1000})
            run_dir = sweep / "runs" / rid
            run_dir.mkdir(parents=True)
            (run_dir / "result.json").write_text(json.dumps({
                "status": "finished", "step": 400, "parameters": 1000, "tokens_per_s": 100.0, "wall_time_s": 10.0,
                "final": {"val/loss": loss[s], "val/ppl": math.exp(loss[s])}, "best": {"val/loss": loss[s]},
                "test/bleu": bleu[s]}))  # where ablate evaluate writes it
    plan = {"name": "t3", "metric": {"name": "val/loss", "goal": "minimize"}, "base_variant": "base",
            "varied_keys": ["row"], "runs": runs, "judged": [j.to_json() for j in JUDGED],
            "design": Design(margin=Margin(0.05), first=tuple(range(SEEDS)), metrics=2).to_json()}
    (sweep / "plan.json").write_text(json.dumps(plan))
    return sweep, values


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return make(tmp_path_factory.mktemp("several"))


def expected(values, row: str, metric: str) -> tuple[float, float, float]:
    """Δ and its paired t interval at 1 - 0.05 / (3 rows x 2 metrics), from scipy."""
    d = values[row][metric] - values["base"][metric]
    level = 1 - ALPHA / (3 * 2)
    half = stats.t.ppf(1 - (1 - level) / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return d.mean(), d.mean() - half, d.mean() + half


def test_each_metric_gets_its_own_interval_at_the_family_s_level(sweep):
    sweep_dir, values = sweep
    report = build_report(sweep_dir)
    assert report.design.rows == 3 and report.design.metrics == 2
    assert [j.name for j in report.judged] == ["val/loss", "test/bleu"]
    for row in report.variants:
        if row.is_base:
            assert row.comparison is None and row.judged == {}
            continue
        for metric, c in (("val/loss", row.comparison), ("test/bleu", row.judged["test/bleu"])):
            diff, lo, hi = expected(values, row.name, metric)
            assert c.diff == pytest.approx(diff) and c.interval == pytest.approx((lo, hi)), (row.name, metric)
            assert c.level == pytest.approx(1 - ALPHA / 6)


def test_the_verdicts_follow_each_metric_s_goal_and_margin(sweep):
    report = build_report(sweep[0])
    verdicts = {row.name: (row.comparison.verdict, row.judged["test/bleu"].verdict)
                for row in report.variants if not row.is_base}
    assert verdicts["h=1"] == ("worse", "worse")  # higher loss, lower BLEU: worse on both goals
    assert verdicts["N=1"][0] == "worse" and verdicts["N=1"][1] == "better"  # BLEU is maximised
    loss, bleu = verdicts["h=16"]
    assert loss in ("equivalent", "not worse", "not better", "undecided") and bleu != "worse"


def test_a_single_metric_design_would_have_had_a_narrower_interval(sweep):
    """The family is rows x metrics: the same values judged on one metric get the wider level 1 - 0.05/3."""
    sweep_dir, values = sweep
    plan = json.loads((sweep_dir / "plan.json").read_text())
    one = sweep_dir.parent / "one"
    one.mkdir(exist_ok=True)
    plan.update(judged=[JUDGED[0].to_json()], design=Design(margin=Margin(0.05), first=tuple(range(SEEDS))).to_json())
    (one / "plan.json").write_text(json.dumps(plan))
    (one / "runs").symlink_to(sweep_dir / "runs")
    single = {r.name: r.comparison for r in build_report(one).variants if not r.is_base}
    double = {r.name: r.comparison for r in build_report(sweep_dir).variants if not r.is_base}
    for name in single:
        assert single[name].level == pytest.approx(1 - ALPHA / 3)
        width = lambda c: c.interval[1] - c.interval[0]  # noqa: E731
        assert width(single[name]) < width(double[name])


def test_every_format_carries_both_verdicts(sweep, tmp_path):
    report = build_report(sweep[0])
    table = list(csv.DictReader(io.StringIO(to_csv(table_columns(report), table_records(report)))))
    by_row = {r["variant"]: r for r in table}
    for row in report.variants:
        if row.is_base:
            continue
        c = row.judged["test/bleu"]
        got = by_row[row.name]
        assert float(got["test/bleu_ci_low"]) == c.interval[0] and float(got["test/bleu_ci_high"]) == c.interval[1]
        assert float(got["test/bleu_delta"]) == c.diff and got["test/bleu_verdict"] == c.statement
        assert got["verdict"] == row.comparison.statement
    terminal = format_terminal(report, width=120)
    lines = terminal.splitlines()
    header = next(line for line in lines if line.startswith("variant"))
    assert "test BLEU verdict" in header and "verdict" in header.replace("test BLEU verdict", "")
    assert max(len(line) for line in lines) <= 120
    h1 = next(line for line in lines if line.startswith("h=1 "))
    assert re.search(r"worse.*worse", h1)
    markdown = format_markdown(report)
    assert "test BLEU verdict" in markdown and "test/bleu (maximize)" in markdown.splitlines()[0]
    h1_md = next(line for line in markdown.splitlines() if line.startswith("| h=1 |"))
    assert h1_md.count(badges.marked("worse")) == 2  # each verdict in its kind's mark
    coloured = next(line for line in format_terminal(report, width=120, colour=True).splitlines() if "h=1" in line)
    assert coloured.count(badges.ansi("worse", "worse")) == 2
    page = render_html(report)
    table = page[page.index('id="verdicts"'):page.index("</table>", page.index('id="verdicts"'))]
    h1_row = next(row for row in table.split("<tr") if ">h=1<" in row)
    assert h1_row.count(f'<span class="badge {badges.css_class("worse")}">worse</span>') == 2
    assert 'id="deltas"' in page and 'id="deltas-1"' in page  # a forest plot per judged metric
    assert "Δ test/bleu (better to the right)" in page


def test_the_w_and_b_report_table_carries_each_metric_s_verdict(sweep, tmp_path, monkeypatch):
    """The table W&B receives (read back from the real offline run files, no server) has the same columns and values
    as table.csv: both metrics' Δ, interval and verdict per row."""
    import wandb

    from ablate.report import upload_table
    from tests.runs.wandb_records import RunLog

    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    report = build_report(sweep[0])
    upload_table(report, project="ablate", entity=None, group="t3", save_dir=tmp_path / "wb", mode="offline")
    wandb.teardown()
    run_dir = next((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    (row,) = [r for r in RunLog(next(run_dir.glob("run-*.wandb"))).history if "report/table" in r]
    table = json.loads((run_dir / "files" / row["report/table"]["path"]).read_text())
    assert table["columns"] == table_columns(report)
    got = {r[0]: dict(zip(table["columns"], r)) for r in table["data"]}
    for variant in report.variants:
        if not variant.is_base:
            c = variant.judged["test/bleu"]
            assert got[variant.name]["test/bleu_verdict"] == c.statement
            assert got[variant.name]["test/bleu_ci_low"] == pytest.approx(c.interval[0])
            assert got[variant.name]["verdict"] == variant.comparison.statement
