"""``ablate sweep CONFIG --rows KEY=V1,V2 --seeds N --margin M``: a sweep written on the command line, kept as the
sweep folder's ``sweep.yaml`` and relaunched from it."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.sweep.conftest import FAST, REPO, ablate_here, plan_of, run_attempts, run_statuses

CONFIG = str(REPO / "configs" / "default.yaml")


def test_each_value_of_each_key_is_a_row_against_the_config(tmp_path):
    """relu is the default config's ffn already: it is the base, not a row of its own."""
    out = ablate_here("sweep", CONFIG, *FAST, "--rows", "model.ffn=relu,swiglu", "--rows", "model.n_heads=2",
                      "--seeds", "2", "--margin", "0.1", "--dry-run", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["runs"]
    assert [(r["variant"], r["seed"]) for r in runs] == [("base", 0), ("base", 1), ("ffn=swiglu", 0),
                                                          ("ffn=swiglu", 1), ("n_heads=2", 0), ("n_heads=2", 1)]
    assert not (tmp_path / "sweeps").exists()  # a dry run writes nothing


def test_a_command_line_sweep_is_kept_as_a_sweep_file_and_relaunched_from_it(tmp_path):
    first = ablate_here("sweep", CONFIG, *FAST, "--rows", "model.n_heads=2", "--seeds", "2", "--margin", "0.1",
                        "--name", "heads", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    sweep_dir = tmp_path / "sweeps" / "heads"
    kept = yaml.safe_load((sweep_dir / "sweep.yaml").read_text())
    assert kept["rows"] == [{"name": "base"}, {"name": "n_heads=2", "model.n_heads": 2}]
    assert kept["parameters"] == {"seed": {"values": [0, 1]}} and kept["decide"] == {"margin": 0.1}
    assert kept["base"] == {"config": CONFIG}
    line = next(x for x in first.stderr.splitlines() if x.startswith("ablate: the sweep file:"))
    assert f"ablate sweep {sweep_dir / 'sweep.yaml'} {' '.join(FAST)} --out {sweep_dir})" in line  # from any folder
    assert run_statuses(sweep_dir) == ["finished"] * 4
    again = ablate_here("sweep", "sweeps/heads/sweep.yaml", *FAST, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert run_attempts(sweep_dir) == [1] * 4 and len(plan_of(sweep_dir)["runs"]) == 4  # nothing trained again


@pytest.mark.parametrize("args, message", [
    (["--rows", "model.ffn"], "--rows='model.ffn' is not allowed; expected KEY=VALUE[,VALUE...]"),
    (["--rows", "model.ffn=relu,"], "expected KEY=VALUE[,VALUE...]"),
    (["--rows", "model.nope=1"], "--rows='model.nope' is not allowed; expected a key of"),
    (["--rows", "model.ffn=relu"], "at least one value the base config does not have already"),
    (["--rows", "model.ffn=swiglu", "--rows", "model.ffn=gelu"], "each key once"),
    (["--seeds", "3"], "--seeds=3 is not allowed; expected nothing without --rows"),
    (["--rows", "model.ffn=swiglu", "--margin", "-1"], "argument --margin: '-1' is not allowed"),
    (["--rows", "model.ffn=swiglu", "--name", "../x"], "--name"),
])
def test_a_wrong_command_line_sweep_is_one_line_exit_2_and_nothing_written(tmp_path, args, message):
    out = ablate_here("sweep", CONFIG, *FAST, *args, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    assert not (tmp_path / "sweeps").exists()
