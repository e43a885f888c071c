"""Matched budgets: every Table 3 row of experiments/table3_multi30k.yaml re-solved for the base's parameter
count, checked against the paper's parameter formula (PAPER.md), not against ablate's own count."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from ablate.errors import ConfigError
from ablate.sweep import load_sweep, plan_sweep
from tests.conftest import REPO

EXPERIMENT = yaml.safe_load((REPO / "experiments" / "table3_multi30k.yaml").read_text())
ROWS = [row for row in EXPERIMENT["rows"] if row["name"] != "base"]
# configs/multi30k.yaml: N = 3, d_model = 256, d_ff = 1024, h = 8, d_k = d_v = 32, V = 8000, post-norm, tied.
BASE = dict(N=3, d=256, d_ff=1024, h=8, d_k=32, d_v=32, V=8000, learned=0)
KEYS = {"model.n_layers": "N", "model.d_model": "d", "model.d_ff": "d_ff", "model.n_heads": "h", "model.d_k": "d_k",
        "model.d_v": "d_v", "model.positional_args.max_len": "learned"}


def paper_count(N: int, d: int, d_ff: int, h: int, d_k: int, d_v: int, V: int, learned: int) -> int:
    """PAPER.md: A = 2(d h d_k + h d_k) + d h d_v + h d_v + h d_v d + d; F = 2 d d_ff + d_ff + d;
    total = N (3A + 2F + 10d) + V d, plus a learned table of max_len x d per stack."""
    A = 2 * (d * h * d_k + h * d_k) + d * h * d_v + h * d_v + h * d_v * d + d
    F = 2 * d * d_ff + d_ff + d
    return N * (3 * A + 2 * F + 10 * d) + V * d + 2 * learned * d


def _dims(row: dict) -> dict:
    return {**BASE, **{KEYS[k]: v for k, v in row.items() if k in KEYS}}


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_match_params_holds_every_table_3_row_within_half_a_percent_or_refuses(row, tmp_path):
    path = tmp_path / "sweep.yaml"
    body = {"name": "m", "base": {"config": str(REPO / "configs" / "multi30k.yaml")}, "match": "params",
            "rows": [{"name": "base"}, row]}
    path.write_text(yaml.safe_dump(body))
    target = paper_count(**BASE)
    dims = _dims(row)
    if "model.d_ff" in row:  # the row changes d_ff itself: there is nothing to re-solve
        with pytest.raises(ConfigError, match="sets model.d_ff"):
            plan_sweep(load_sweep(path), tmp_path)
        return
    # The paper's count is affine in d_ff: the best integer d_ff >= 1, found here without ablate.
    slope = paper_count(**{**dims, "d_ff": 1001}) - paper_count(**{**dims, "d_ff": 1000})
    ideal = (target - paper_count(**{**dims, "d_ff": 0})) / slope
    best = min((max(1, int(ideal)), max(1, int(ideal) + 1)),
               key=lambda f: abs(paper_count(**{**dims, "d_ff": f}) - target))
    reachable = abs(paper_count(**{**dims, "d_ff": best}) / target - 1) <= 0.005
    if not reachable:
        with pytest.raises(ConfigError, match=r"within 0.5% of the base's"):
            plan_sweep(load_sweep(path), tmp_path)
        return
    runs = plan_sweep(load_sweep(path), tmp_path)
    solved = runs[1].matched["value"]
    assert solved == best
    assert abs(paper_count(**{**dims, "d_ff": solved}) / target - 1) <= 0.005
    assert runs[1].parameters == paper_count(**{**dims, "d_ff": solved})
    assert runs[1].varied["model.d_ff"] == solved and f"model.d_ff={solved}" in runs[1].overrides


def test_only_the_d_model_512_row_cannot_be_matched_by_d_ff():
    """Which rows the formula says are out of reach (so that the test above is not vacuous)."""
    target = paper_count(**BASE)
    out = [r["name"] for r in ROWS if "model.d_ff" not in r
           and paper_count(**{**_dims(r), "d_ff": 1}) > target * 1.005]
    assert out == ["C d_model=512"]


def test_match_flops_and_row_level_match(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(f"""
        name: m
        base: {{config: {REPO / 'configs' / 'default.yaml'}}}
        rows:
          - {{name: base}}
          - {{name: swiglu, model.ffn: swiglu, match: {{budget: flops, by: model.d_ff, tolerance: 0.01}}}}
          - {{name: gelu, model.ffn: gelu}}
    """))
    runs = plan_sweep(load_sweep(path), tmp_path)
    base, swiglu, gelu = runs
    assert swiglu.matched["budget"] == "flops" and abs(swiglu.flops_per_token / base.flops_per_token - 1) <= 0.01
    assert swiglu.matched["value"] < 256  # three d_ff-wide matrices instead of two: a smaller d_ff
    assert gelu.matched is None and gelu.varied["model.d_ff"] == 256


@pytest.mark.parametrize("spec,message", [
    ("match: tokens", "match.budget='tokens'.*params, flops"),
    ("match: {budget: params, tolerance: 2}", "match.tolerance=2.*fraction"),
    ("match: {budget: params, along: model.d_ff}", "match=.*budget: params"),
])
def test_bad_match_specs_are_named(tmp_path, spec, message):
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: m\n{spec}\nrows: [{{name: base}}]\n")
    with pytest.raises(ConfigError, match=message):
        load_sweep(path)
