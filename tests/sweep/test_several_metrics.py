"""A sweep that judges every row on several metrics (``decide.metrics``): how the file is read and refused, and a
sequential sweep for real, whose rows get seeds until every judged metric of theirs is decided (or the cap)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.report import build_report
from ablate.sweep.read import load_sweep
from tests.sweep.conftest import DECIDING_ROWS as ROWS, ablate_here, plan_of, sweep_file

TWO = """
parameters:
  seed: {values: [0, 1, 2]}
decide:
  max_seeds: 5
  metrics:
    - {name: val/acc, goal: maximize, margin: 0.02}
    - {name: val/loss, goal: minimize, margin: 0.05}
"""


def _file(tmp: Path, extra: str) -> Path:
    path = sweep_file(tmp, ROWS, name="two")
    path.write_text(path.read_text() + textwrap.dedent(extra))
    return path


def test_the_sweep_s_metric_leads_and_the_family_counts_rows_times_metrics(tmp_path):
    sweep = load_sweep(_file(tmp_path, TWO))
    assert [j.name for j in sweep.judged] == ["val/loss", "val/acc"]  # metric: (val/loss by default) first
    design = sweep.design(2)
    assert design.metrics == 2 and design.row_alpha == pytest.approx(0.05 / 4)
    assert design.margin.value == 0.05 and design.judging(sweep.judged[1]).margin.value == 0.02


@pytest.mark.parametrize("decide, key, says", [
    ("{metrics: [{name: val/acc, goal: maximize}]}", "decide.metrics", "the sweep's metric"),
    ("{metrics: [{name: val/loss, goal: maximize}]}", "decide.metrics[0].goal", "as metric.goal says"),
    ("{margin: 0.1, metrics: [{name: val/loss}]}", "decide.margin", "give each metric its own"),
    ("{metrics: [{name: val/loss}, {name: val/lost}]}", "decide.metrics[1].name", "did you mean"),
    ("{metrics: [{name: val/loss}, {name: val/loss}]}", "decide.metrics[1].name", "each is judged once"),
    ("{metrics: [{name: val/loss}, {name: test/bleu, goal: maximize}]}", "decide.metrics[1].name",
     "evaluate:"),
    ("{metrics: [{name: val/loss, margin: -1}]}", "decide.metrics[0].margin", "positive"),
    ("{metrics: [{name: val/loss, width: 2}]}", "decide.metrics[0]", "{name, goal, margin}"),
    ("{metrics: []}", "decide.metrics", "a list of {name, goal, margin}"),
])
def test_a_bad_metrics_list_names_its_key(tmp_path, decide, key, says):
    with pytest.raises(ConfigError) as err:
        load_sweep(_file(tmp_path, f"decide: {decide}\n"))
    assert err.value.key == key and says in str(err.value)


def test_a_metric_ablate_evaluate_writes_is_judged_with_the_sweep_s_evaluation(tmp_path):
    sweep = load_sweep(_file(tmp_path, "evaluate: {average_last: 2}\ndecide: {metrics: [{name: val/loss}, "
                                       "{name: test/bleu, goal: maximize, margin: 0.5}]}\n"))
    assert [(j.name, j.goal) for j in sweep.judged] == [("val/loss", "minimize"), ("test/bleu", "maximize")]


@pytest.mark.slow
def test_rows_get_seeds_until_every_judged_metric_is_decided(tmp_path):
    done = ablate_here("sweep", str(_file(tmp_path, TWO)), "--workers", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    sweep_dir = tmp_path / "sweeps" / "two"
    plan = plan_of(sweep_dir)
    assert [j["name"] for j in plan["judged"]] == ["val/loss", "val/acc"] and plan["design"]["metrics"] == 2
    seeds: dict[str, list[int]] = {}
    for run in plan["runs"]:
        seeds.setdefault(run["variant"], []).append(run["seed"])
    report = build_report(sweep_dir)
    for row in report.variants:
        if row.is_base:
            continue
        looks = [row.comparison.decided_at, row.judged["val/acc"].decided_at]
        # a seed more while either metric is open; once both are decided, at most the one seed an idle worker
        # started ahead of the deciding look
        needed = 5 if None in looks else max(looks)
        assert needed <= len(seeds[row.name]) <= min(5, needed + 1), (row.name, looks, seeds[row.name])
    assert len(seeds["base"]) == max(len(s) for s in seeds.values())  # every row's seeds paired with the base's
