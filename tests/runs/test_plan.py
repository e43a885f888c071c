"""plan.json has one owner (:mod:`ablate.runs.plan`): what the sweep writes, the report reads back field for field,
and a plan the reader cannot use is refused naming the key."""

from __future__ import annotations

import json

import pytest

from ablate.errors import ConfigError
from ablate.report.collect import report_plan
from ablate.runs.plan import PLAN_FILE, PlanRecord, plan_path, planned_runs, read_plan_record, write_plan_record
from ablate.stats.design import Design
from ablate.sweep import load_sweep
from ablate.sweep.plan import Planner, plan_of, read_planned, write_plan
from tests.sweep.conftest import sweep_file

RECORD = PlanRecord(
    name="t", description="two rows", method="grid", metric={"name": "val/loss", "goal": "minimize"},
    runs=({"id": "a1", "variant": "base", "seed": 0, "run_dir": "runs/a1"},
          {"id": "b2", "variant": "wide", "seed": None, "run_dir": "runs/b2"}),
    base_variant="base", varied_keys=("model.d_ff",), factors=({"name": "row", "levels": ["base", "wide"]},),
    design=Design().to_json())


def test_a_record_written_reads_back_equal(tmp_path):
    write_plan_record(tmp_path, RECORD)
    assert plan_path(tmp_path) == tmp_path / PLAN_FILE
    assert read_plan_record(tmp_path) == RECORD
    assert PlanRecord.from_json(json.loads(plan_path(tmp_path).read_text())).to_json() == RECORD.to_json()
    assert planned_runs(tmp_path) == list(RECORD.runs)


def test_what_the_sweep_writes_the_report_reads_field_for_field(tmp_path):
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: wide, model.d_ff: 96}
    """)
    sweep = load_sweep(path)
    runs = Planner(sweep).plan(sweep.points())
    write_plan(sweep, tmp_path, runs)
    record = read_plan_record(tmp_path)
    assert record == plan_of(sweep, runs) and record.to_json() == json.loads(plan_path(tmp_path).read_text())
    assert read_planned(tmp_path) == runs
    plan = report_plan(tmp_path)
    assert (plan.name, plan.metric, plan.goal, plan.base_variant) == (sweep.name, sweep.metric["name"],
                                                                      record.goal, "base")
    assert plan.runs == record.runs and plan.design == Design.from_json(record.design)


def test_a_plan_without_a_base_variant_compares_with_its_first_run():
    data = {**RECORD.to_json(), "base_variant": None}
    assert PlanRecord.from_json(data).base_variant == "base"


@pytest.mark.parametrize(("change", "key"), [({"metric": None}, "metric"), ({"runs": [{"id": "a"}]}, "runs[0].variant"),
                                             ({"metric": {"name": "m", "goal": "up"}}, "metric.goal"),
                                             ({"factors": [{"name": 1}]}, "factors")])
def test_a_plan_the_report_cannot_use_is_refused_naming_the_key(change, key):
    data = {k: v for k, v in {**RECORD.to_json(), **change}.items() if v is not None}
    with pytest.raises(ConfigError) as err:
        PlanRecord.from_json(data, "sweeps/t/plan.json")
    assert key in str(err.value) and "sweeps/t/plan.json" in str(err.value)
