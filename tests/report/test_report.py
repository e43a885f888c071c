"""The comparison report of the fabricated sweep in conftest.py: its numbers, every format, the page in a browser."""

from __future__ import annotations

import ast
import csv
import json
import math
import re
import shutil
import subprocess
import sys
import types
from datetime import datetime
from html import escape
from pathlib import Path

import pytest

import ablate
from ablate.errors import ConfigError
from ablate.report import VariantRow, build_report, format_markdown, format_terminal, upload_table, write_report
from ablate.report.html import render_html
from ablate.report.records import table_columns
from ablate.report.text import display_cells, display_headers
from tests.report.conftest import ERROR

SQRT_2 = math.sqrt(2.0)


@pytest.fixture(scope="module")
def report(sweep_dir):
    return build_report(sweep_dir, now=datetime(2024, 5, 1, 12, 30))


@pytest.fixture(scope="module")
def written(report, tmp_path_factory):
    return write_report(report, tmp_path_factory.mktemp("out") / "report")


def variant(report, name: str) -> VariantRow:
    return next(row for row in report.variants if row.name == name)


def read_csv(path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# --- the numbers -------------------------------------------------------------------------------


def test_variants_follow_the_plan_with_their_varied_values(report):
    assert [row.name for row in report.variants] == ["base", "h1", "h16"]
    assert variant(report, "h1").varied == {"model.n_heads": 1, "model.d_k": 512, "model.d_v": 512}
    assert [row.is_base for row in report.variants] == [True, False, False]
    assert variant(report, "base").parameters == 65130496
    assert (report.name, report.metric, report.goal, report.date) == ("table3_A", "val/loss", "minimize",
                                                                       "2024-05-01 12:30")


def test_means_and_sample_stds_over_the_finished_seeds(report):
    base, h1 = variant(report, "base"), variant(report, "h1")
    # base seed 2 has no final val/loss: its best (2.5) stands in
    assert base.metrics["val/loss"].mean == pytest.approx(2.0) and base.metrics["val/loss"].std == pytest.approx(0.5)
    assert base.metrics["val/loss"].n == 3
    assert (base.metrics["val/ppl"].mean, base.metrics["val/ppl"].std) == pytest.approx((8.0, 4.0))
    assert (base.metrics["val/bleu"].mean, base.metrics["val/bleu"].std) == pytest.approx((22.0, 2.0))
    # h1: the failed seed is left out, n = 2
    assert (h1.metrics["val/loss"].mean, h1.metrics["val/loss"].std) == pytest.approx((2.75, 0.25 * SQRT_2))
    assert h1.metrics["val/loss"].n == 2 and (h1.n_finished, h1.n_runs) == (2, 3)
    assert (h1.metrics["val/ppl"].mean, h1.metrics["val/ppl"].std) == pytest.approx((16.0, 4 * SQRT_2))
    assert (h1.tokens_per_s.mean, h1.tokens_per_s.std) == pytest.approx((950.0, 50 * SQRT_2))
    assert (base.wall_time_s.mean, base.wall_time_s.std) == pytest.approx((70.0, 10.0))


def test_delta_is_over_the_seeds_both_finished_the_values_of_the_comparison(report):
    """h1's seed 2 failed: Δ pairs seeds 0 and 1 (2.5 - 1.5, 3.0 - 2.0), as its comparison does; the val loss
    column still averages every finished seed of each row."""
    assert [row.delta for row in report.variants] == [pytest.approx(0.0), pytest.approx(1.0), None]
    h1 = variant(report, "h1")
    assert h1.comparison.diff == h1.delta and h1.comparison.n == 2 and h1.comparison.failed == (1, 3, 0, 3)
    cells = dict(zip(display_headers(report), display_cells(report, h1)))
    assert cells["Δ val loss"] == "+1.000" and cells["val loss"] == "2.750 ± 0.354"
    assert cells["pairs"] == "2 of 3 paired" and cells["verdict"] == "cannot test"  # 1.0 on both seeds: no spread


def test_a_variant_without_a_finished_run_is_pending_not_zero(report):
    h16 = variant(report, "h16")
    assert h16.status == "pending" and h16.n_finished == 0 and h16.n_failed == 0
    assert all(stat is None for stat in h16.metrics.values()) and h16.delta is None and h16.tokens_per_s is None
    cells = dict(zip(display_headers(report), display_cells(report, h16)))
    assert [cells[k] for k in ("val loss", "val PPL", "val BLEU")] == ["pending"] * 3
    assert cells["Δ val loss"] == cells["tokens/s"] == cells["wall time"] == "—" and cells["runs"] == "0/2"
    assert not any(re.fullmatch(r"[+-]?0(\.0+)?", cell) for cell in cells.values())
    assert [run.status for run in h16.runs] == ["pending", "running"]


def test_failures_are_counted_with_the_first_error(report):
    h1 = variant(report, "h1")
    assert (h1.n_failed, h1.first_error, h1.status) == (1, ERROR, "partial")
    cells = dict(zip(display_headers(report), display_cells(report, h1)))
    assert cells["failed"] == "1/3: RuntimeError: loss is nan | at step 100 (see traceback)"
    assert report.status_counts() == {"finished": 5, "failed": 1, "pending": 1, "running": 1}


def test_curves_pool_seeds_step_by_step_and_leave_out_failed_runs(report):
    base, h1, h16 = (variant(report, name).curve for name in ("base", "h1", "h16"))
    assert base.steps == (100, 200, 300)
    assert base.mean == pytest.approx((3.5, 2.5, 2.0)) and base.lo == (3.0, 2.0, 1.5) and base.hi == (4.0, 3.0, 2.5)
    assert h1.mean[0] == pytest.approx(4.25) and h1.hi[0] == 4.5  # the failed seed logged 5.0 at step 100
    assert h16.steps == (100, 200) and h16.mean == pytest.approx((3.8, 2.9))  # the running seed's progress


def test_bleu_is_a_column_only_when_a_run_logged_it(fabricate):
    report = build_report(fabricate(bleu=False))
    assert report.metric_keys == ("val/loss", "val/ppl") and not report.has_bleu
    assert "BLEU" not in format_markdown(report) and "BLEU" not in format_terminal(report)


def test_test_bleu_from_ablate_evaluate_is_a_column(fabricate):
    sweep = fabricate()
    for rid, score in (("base-s0", 30.0), ("base-s1", 32.0), ("h1-s0", 25.0)):
        path = sweep / "runs" / rid / "result.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "test/bleu": score}))  # as evaluate_run merges it
    report = build_report(sweep)
    assert report.metric_keys == ("val/loss", "val/ppl", "val/bleu", "test/bleu")
    cells = dict(zip(display_headers(report), display_cells(report, variant(report, "base"))))
    assert cells["test BLEU"] == "31.00 ± 1.41" and cells["val BLEU"] == "22.00 ± 2.00"
    assert "test BLEU" in format_markdown(report)


def test_runs_trained_at_different_precisions_are_said_in_every_format(fabricate):
    sweep = fabricate()

    def stamp(precisions: dict[str, str]) -> None:
        for path in sorted((sweep / "runs").glob("*/result.json")):
            result = json.loads(path.read_text())
            result["precision"] = precisions.get(path.parent.name, "32-true")
            path.write_text(json.dumps(result))

    stamp({})  # one precision: nothing to say
    assert "mixed precision" not in format_terminal(build_report(sweep))
    # seven runs wrote a result.json (one of them still running): 5 in fp32, 2 in bf16
    stamp({"h1-s0": "bf16-mixed", "h1-s1": "bf16-mixed"})
    report = build_report(sweep)
    line = ("mixed precision: the runs trained in different precisions (32-true: 5, bf16-mixed: 2); a Δ between them "
            "includes the precision's effect (set trainer.precision to one value to compare like with like).")
    assert line in " ".join(format_terminal(report).split()) and line in format_markdown(report).splitlines()
    assert escape(line) in render_html(report)


def test_a_headline_metric_outside_the_table_gets_its_own_column(fabricate):
    report = build_report(fabricate(metric="val/acc", goal="maximize"))
    assert report.metric_keys == ("val/loss", "val/ppl", "val/bleu", "val/acc")
    assert [row.delta for row in report.variants] == [pytest.approx(0.0), pytest.approx(-0.25), None]  # paired
    assert "maximize: higher is better" in format_markdown(report)


@pytest.mark.parametrize("plan, message", [
    ('{"metric": {"name": "val/loss"}, "runs": []}', "plan.json: name=None is not allowed"),
    ('{"name": "x", "metric": {"name": "val/loss", "goal": "lowest"}, "runs": []}',
     "metric.goal='lowest' is not allowed; expected one of minimize, maximize"),
    ('{"name": "x", "metric": {"name": "val/loss"}, "runs": [{"id": "a"}]}', "runs[0].variant=None"),
])
def test_a_bad_plan_names_the_key(tmp_path, plan, message):
    (tmp_path / "plan.json").write_text(plan)
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_report(tmp_path)
    with pytest.raises(FileNotFoundError, match="no plan.json"):
        build_report(tmp_path / "elsewhere")


# --- the files ---------------------------------------------------------------------------------


def test_table_csv_round_trips_every_number(report, written):
    rows = {row["variant"]: row for row in read_csv(written["table.csv"])}
    assert list(rows) == ["base", "h1", "h16"]
    for row in report.variants:
        for key, stat in row.metrics.items():
            got = rows[row.name]
            if stat is None:
                assert got[f"{key}_mean"] == got[f"{key}_std"] == "" and got[f"{key}_n"] == "0"
            else:
                assert (float(got[f"{key}_mean"]), float(got[f"{key}_std"])) == (stat.mean, stat.std)
    h1 = rows["h1"]
    assert h1["model.n_heads"] == "1" and h1["status"] == "partial" and h1["first_error"] == ERROR
    assert float(h1["val/loss_delta"]) == pytest.approx(1.0) and rows["h16"]["val/loss_delta"] == ""
    assert (h1["row_failed"], h1["row_runs"], h1["base_failed"], h1["base_runs"]) == ("1", "3", "0", "3")
    header = written["table.csv"].read_text().splitlines()[0].split(",")
    assert len(header) == len(set(header))  # each column once (the W&B table's too: the same columns)


def test_runs_csv_has_one_row_per_planned_run(written):
    runs = read_csv(written["runs.csv"])
    assert [r["id"] for r in runs] == ["base-s0", "base-s1", "base-s2", "h1-s0", "h1-s1", "h1-s2", "h16-s0", "h16-s1"]
    assert [r["status"] for r in runs][-3:] == ["failed", "pending", "running"]
    assert runs[2]["val/loss"] == "2.5" and runs[2]["final/val/loss"] == "" and runs[2]["best/val/loss"] == "2.5"
    assert runs[0]["run_dir"] == "runs/base-s0"


def test_markdown_is_the_verdict_view_then_every_column_folded(report, written):
    text = written["table.md"].read_text()
    assert text == format_markdown(report)
    lines = text.splitlines()
    fold = lines.index("<details><summary>Every column</summary>")
    verdicts = [line for line in lines[:fold] if line.startswith("|")]
    table = [line for line in lines[fold:] if line.startswith("|")]
    assert verdicts[0] == "| variant | val loss | runs | Δ val loss | 95% CI (simult.) | verdict |"
    assert verdicts[2:] == ["| base | 2.000 ± 0.500 | 3/3 | base |  | ⚫ base |",
                            "| h1 | 2.750 ± 0.354 | 2/3 | +1.000 | — | ⚪ cannot test |",
                            "| h16 | pending | 0/2 | — | — | — |"]
    n_cols = len(display_headers(report))
    assert len(table) == 2 + 3 and re.fullmatch(r"\|(-{3}:?\|)+", table[1]) and "</details>" in lines[fold:]
    assert all(len(re.findall(r"(?<!\\)\|", line)) == n_cols + 1 for line in table)  # the error's | is escaped
    assert table[2].startswith("| base | 8 | 64 | 64 | 65.13M | 2.000 ± 0.500 | 8.00 ± 4.00 | 22.00 ± 2.00 | base |")


def test_terminal_table_columns_line_up(report):
    lines = format_terminal(report).splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    table = lines[rule - 1: rule + 4]
    gaps = [i for i, ch in enumerate(lines[rule]) if ch == " "]
    assert all(line[i] == " " for line in table for i in gaps if i < len(line))
    assert "8 runs: 5 finished, 1 failed, 1 pending, 1 running." in lines
    assert lines[rule - 1].split() == ["variant", "val", "loss", "runs", "Δ", "val", "loss", "95%", "CI", "(simult.)",
                                       "verdict"]
    assert lines[rule + 2].split() == ["h1", "2.750", "±", "0.354", "2/3", "+1.000", "—", "cannot", "test"]
    assert "failed in h1: RuntimeError: loss is nan | at step 100 (see traceback)" in lines


def test_the_terminal_shows_every_column_with_wide(report):
    lines = format_terminal(report, wide=True).splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    assert lines[rule - 1].split()[:5] == ["variant", "n_heads", "d_k", "d_v", "params"]
    assert "1/3: RuntimeError: loss is nan | at step 100 (see traceback)" in lines[rule + 2]
    assert any(line.startswith("Mean ± sample std over the finished seeds") for line in lines)  # the legend
    assert not any(line.startswith("Mean ± sample std") for line in format_terminal(report).splitlines())


def test_the_terminal_colours_each_verdict_by_its_kind_and_keeps_the_columns(report):
    plain, coloured = format_terminal(report), format_terminal(report, colour=True)
    assert "\033[1mbase\033[0m" in coloured and "\033[" not in plain
    assert re.sub(r"\033\[[0-9;]*m", "", coloured) == plain  # the escape codes wrap the text, never the padding


def test_files_are_written_whole(written):
    out = written["report.html"].parent
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "runs.csv", "table.csv", "table.md"]


def test_html_needs_nothing_from_outside(written):
    page = written["report.html"].read_text()
    assert page.count("<svg") == 3 and page.count("</svg>") == 3
    assert not re.search(r"<(script|link|img|iframe)\b", page) and "@import" not in page
    assert not re.search(r"url\((?!#)", page)  # only the SVGs' own clip paths
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<title>table3_A: val/loss (minimize)</title>" in page and "2024-05-01 12:30" in page
    assert "8 runs: 5 finished, 1 failed, 1 pending, 1 running." in page


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(chromium() is None, reason="no chromium binary on PATH (apt-get install -y chromium)")
def test_report_html_renders_offline_in_headless_chromium(written, tmp_path):
    # A dead proxy: any request for something outside the file would fail.
    args = [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=127.0.0.1:9", "--window-size=1300,1900"]
    url = written["report.html"].resolve().as_uri()
    dom = subprocess.run([*args, "--dump-dom", url], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert re.search(r'<table id="variants" class="wide">', dom) and dom.count("<tr class=") == 3 + 3 + 8
    assert dom.count("<svg") == 3 and 'id="curves"' in dom and 'id="finals"' in dom and 'id="deltas"' in dom
    assert "val/loss vs step" in dom and "final val/loss per variant" in dom and "pending" in dom
    shot = tmp_path / "report.png"
    subprocess.run([*args, f"--screenshot={shot}", url], capture_output=True, timeout=60, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


# --- W&B ---------------------------------------------------------------------------------------


def test_upload_table_logs_the_csv_table(report, monkeypatch):
    # A stand-in module, so the test neither imports wandb (seconds) nor logs anything.
    module = types.ModuleType("ablate.runs.wandb")
    monkeypatch.setitem(sys.modules, "ablate.runs.wandb", module)
    calls = []
    monkeypatch.setattr(module, "log_table", lambda **kwargs: calls.append(kwargs), raising=False)
    upload_table(report, project="ablate", entity=None, group="table3_A", save_dir="wandb", mode="offline")
    assert len(calls) == 1
    call = calls[0]
    assert {k: call[k] for k in ("project", "entity", "group", "name", "save_dir", "mode")} == dict(
        project="ablate", entity=None, group="table3_A", name="table3_A-report", save_dir="wandb", mode="offline")
    assert call["log"] == Path("wandb") / "report.log"  # wandb's notes go to the report's log, not the terminal
    assert call["columns"] == table_columns(report)
    rows = {row[0]: dict(zip(call["columns"], row)) for row in call["rows"]}
    assert list(rows) == ["base", "h1", "h16"] and rows["h1"]["val/loss_mean"] == pytest.approx(2.75)
    assert rows["h16"]["val/loss_mean"] is None and rows["h16"]["status"] == "pending"


def test_upload_table_calls_log_table_with_its_real_keywords():
    """The real ``log_table`` (read, not imported) takes exactly the keywords upload_table passes."""
    path = Path(ablate.__file__).parent / "runs" / "wandb.py"  # read, not imported
    tree = ast.parse(path.read_text())
    fn = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "log_table")
    assert [a.arg for a in fn.args.kwonlyargs] == ["project", "entity", "group", "name", "columns", "rows",
                                                    "save_dir", "mode", "log"]


def test_a_metrics_row_cut_short_is_left_out_not_an_error(fabricate):
    sweep = fabricate()
    path = next((sweep / "runs" / "base-s0" / "logs" / "version_0").glob("metrics.csv"))
    path.write_text(path.read_text() + "350,0,0.001,1e")  # a run killed while CSVLogger wrote its row
    report = build_report(sweep)
    assert variant(report, "base").curve.steps == (100, 200, 300)


def test_a_read_only_sweep_still_prints_its_table(sweep_dir, capsys, monkeypatch):
    from ablate.cli import sweep as sweep_cli

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("ablate.report.write_report", refuse)
    assert sweep_cli.print_report(sweep_dir) is False
    out, err = capsys.readouterr()
    assert "variant" in out and "base" in out and "the report's files were not written" in err
