"""Factors in the plan: every run's row, ladder step and swept values; a ladder's steps crossed with every row, its
matched budgets held to the base row at the same step (checked against the paper's parameter formula); mistakes in
a ladder refused in one line."""

from __future__ import annotations


import pytest

from ablate.errors import ConfigError
from ablate.sweep import load_sweep, plan_sweep
from ablate.sweep.plan import plan_record
from tests.conftest import REPO
from tests.sweep.conftest import write_sweep
from tests.sweep.test_match import paper_count

BASE = f"{{config: {REPO / 'configs' / 'multi30k.yaml'}, overrides: [data.vocab_size=1000]}}"


def test_every_run_records_its_level_of_every_factor(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, f"""
        base: {BASE}
        rows: [{{name: base}}, {{name: pre, model.norm_position: pre}}]
        ladder:
          - {{name: S, model.d_model: 64, model.d_k: 8, model.d_v: 8}}
          - {{name: L, model.d_model: 128, model.d_k: 16, model.d_v: 16}}
        parameters:
          model.dropout: {{values: [0.1, 0.0]}}
          train.label_smoothing: {{value: 0.1}}
          seed: {{values: [0, 1]}}
    """))
    runs = plan_sweep(sweep, tmp_path)
    assert len(runs) == 2 * 2 * 2 * 2
    assert runs[0].variant == "base, S, dropout=0.1" and runs[0].factors == {"row": "base", "ladder": "S",
                                                                             "model.dropout": 0.1}
    assert {r.variant: r.factors["ladder"] for r in runs}["pre, L, dropout=0.0"] == "L"
    record = plan_record(sweep, runs)
    assert record["factors"] == [{"name": "row", "levels": ["base", "pre"]}, {"name": "ladder", "levels": ["S", "L"]},
                                 {"name": "model.dropout", "levels": [0.1, 0.0]}]  # a constant is no factor
    assert "model.d_model" in record["varied_keys"]


def test_a_matched_budget_is_held_to_the_base_row_at_the_same_step(tmp_path):
    """A GLU row matched to the base's parameters at each size: d_ff solved per step, each within 0.5 % of the
    paper's formula for the base at that step."""
    sweep = load_sweep(write_sweep(tmp_path, f"""
        base: {BASE}
        match: params
        rows: [{{name: base}}, {{name: small_dk, model.d_k: 4}}]
        ladder:
          - {{name: S, model.d_model: 64, model.d_ff: 256}}
          - {{name: L, model.d_model: 128, model.d_ff: 512}}
    """))
    runs = {r.variant: r for r in plan_sweep(sweep, tmp_path)}
    for step, d, d_ff in (("S", 64, 256), ("L", 128, 512)):
        base = paper_count(N=3, d=d, d_ff=d_ff, h=8, d_k=32, d_v=32, V=1000, learned=0)
        assert runs[f"base, {step}"].parameters == base
        matched = runs[f"small_dk, {step}"].matched
        assert matched["target"] == base and abs(matched["achieved"] - base) / base < 0.005
        assert runs[f"small_dk, {step}"].parameters == paper_count(N=3, d=d, d_ff=matched["value"], h=8, d_k=4,
                                                                    d_v=32, V=1000, learned=0)


@pytest.mark.parametrize("text,key", [
    ("method: random\nrun_cap: 4\nrows: [{name: base}]\n"
     "ladder: [{name: S, model.d_model: 64}, {name: L, model.d_model: 128}]",
     "ladder"),
    ("rows: [{name: base}]\nladder: [{name: S, model.d_model: 64}]", "ladder"),
    ("rows: [{name: base}, {name: w, model.d_model: 32}]\n"
     "ladder: [{name: S, model.d_model: 64}, {name: L, model.d_model: 128}]",
     "ladder[0].model.d_model"),
    ("rows: [{name: base}]\nladder: [{name: S, model.d_model: 64}, {name: S, model.d_model: 128}]", "ladder[1].name"),
    ("rows: [{name: base}]\nladder: [{name: S, model.d_model: 64, match: params}, {name: L}]", "ladder[0].match"),
    ("ladder: {S: 1}", "ladder"),
])
def test_a_bad_ladder_is_refused_naming_its_key(tmp_path, text, key):
    with pytest.raises(ConfigError) as err:
        load_sweep(write_sweep(tmp_path, f"base: {BASE}\n" + text))
    assert err.value.key == key


def test_the_dry_run_says_what_the_report_will_compare(tmp_path):
    from ablate.cli.matrix import format_matrix

    sweep = load_sweep(REPO / "experiments" / "norm_warmup.yaml")
    text = format_matrix(sweep, plan_sweep(sweep, tmp_path))
    assert ("comparisons: 7 in one family (2 rows, 2 main effects, 2 simple effects, 1 interaction); each row against "
            "the base row at the same train.schedule_args.warmup") in text
