"""Sweeps sent to W&B travel as plain parameters and come back as exactly the local runs' overrides."""

from __future__ import annotations

import itertools
import json
import textwrap

import yaml

from ablate.sweep import load_sweep, plan_sweep, run_config
from ablate.sweep.wandb_backend import from_wandb, to_wandb
from tests.conftest import REPO


def test_round_trip_through_wandb_form_gives_the_same_run_configs(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(f"""
        name: rt
        base: {{config: {REPO / 'configs' / 'default.yaml'}, overrides: [train.max_steps=10]}}
        rows:
          - {{name: base}}
          - {{name: "h=1", model.n_heads: 1, model.d_k: 64, model.d_v: 64}}
        parameters:
          model.dropout: {{values: [0.0, 0.2]}}
          seed: {{values: [0, 1]}}
    """))
    sweep = load_sweep(path)
    wb = to_wandb(sweep, ["data.batch_size=8"])
    # Every parameter W&B sees is plain: a value or a list of scalars, nothing nested.
    yaml.safe_dump(wb)
    for spec in wb["parameters"].values():
        values = spec.get("values", [spec.get("value")])
        assert all(isinstance(v, (str, int, float)) for v in values)
    assert wb["parameters"]["row"] == {"values": ["base", "h=1"]}

    local = {r.id for r in plan_sweep(sweep, tmp_path, ["data.batch_size=8"])}
    names = wb["parameters"]["row"]["values"]
    grid = itertools.product(names, [0.0, 0.2], [0, 1])
    fixed = {k: v["value"] for k, v in wb["parameters"].items() if "value" in v}
    remote = set()
    for row, dropout, seed in grid:  # what a W&B agent's run.config holds
        base, overrides, name = from_wandb({**fixed, "row": row, "model.dropout": dropout, "seed": seed})
        assert name == "rt" and base == str(sweep.base_config)
        from ablate.runs.files import config_hash

        remote.add(config_hash(run_config(sweep, overrides, None)))
    assert remote == local
    assert json.loads(fixed["ablate.overrides"]) == ["train.max_steps=10", "data.batch_size=8"]
