"""Every registered search method (:data:`ablate.sweep.methods.METHODS`) goes through the generic path: a sweep file
naming it is read and checked, planned and shown by a dry run, as text and as JSON, capped and open-ended. A method
added to the registry is tested here without a line more."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from ablate.cli import main
from ablate.errors import ConfigError
from ablate.sweep import load_sweep
from ablate.sweep.methods import METHODS, SearchMethod, method_named
from ablate.sweep.params import Param
from tests.conftest import REPO

BASE = f"base: {{config: {REPO / 'configs/default.yaml'}, overrides: [train.max_steps=10]}}"
NAMES = list(METHODS)


def _sweep_file(tmp_path: Path, method: str, extra: str = "run_cap: 4\n") -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(textwrap.dedent(f"""
        {BASE}
        method: {method}
        parameters:
          model.dropout: {{values: [0.0, 0.1]}}
          seed: {{values: [0, 1]}}
    """) + extra)
    return path


def test_the_registry_holds_the_methods_sweep_files_name_with_grid_first():
    assert NAMES[:3] == ["grid", "random", "bayes"]  # the order `method` errors list them in; grid is the default
    assert all(isinstance(m, SearchMethod) and m.name == n and method_named(n) is m for n, m in METHODS.items())


@pytest.mark.parametrize("value", ["hyperband", ["grid"], {"name": "grid"}, 3])
def test_a_method_not_registered_is_refused_in_one_line_naming_those_that_are(tmp_path, value):
    path = tmp_path / "odd.yaml"
    path.write_text(f"{BASE}\nmethod: {json.dumps(value)}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: method={value!r} is not allowed; expected one of "
                                                    f"{', '.join(NAMES)}")):
        load_sweep(path)


@pytest.mark.parametrize("name", NAMES)
def test_a_sweep_file_reads_as_its_method(tmp_path, name):
    sweep = load_sweep(_sweep_file(tmp_path, name))
    assert sweep.method == name and sweep.search is METHODS[name]
    assert not sweep.open_ended and sweep.seeds == [0, 1]  # listed seeds are replicates, whatever the method


@pytest.mark.parametrize("name", NAMES)
def test_a_parameter_the_method_refuses_is_refused_by_the_file(tmp_path, name):
    path = tmp_path / "uniform.yaml"
    param = Param.parse("model.dropout", {"min": 0.0, "max": 0.2}, str(path))  # a uniform: not every method takes it
    try:
        METHODS[name].check_parameter("model.dropout", param, str(path))
        refused = None
    except ConfigError as err:
        refused = err
    path.write_text(f"{BASE}\nmethod: {name}\nrun_cap: 2\nparameters:\n  model.dropout: {{min: 0.0, max: 0.2}}\n")
    if refused is None:
        assert load_sweep(path).search is METHODS[name]
    else:
        with pytest.raises(ConfigError, match=re.escape(str(refused))):
            load_sweep(path)


@pytest.mark.parametrize("name", NAMES)
def test_a_ladder_is_read_only_by_a_factorial_method(tmp_path, name):
    path = _sweep_file(tmp_path, name, "ladder:\n  - {name: small}\n  - {name: big, model.d_ff: 96}\n")
    if METHODS[name].factorial:
        assert [s["name"] for s in load_sweep(path).ladder] == ["small", "big"]
    else:
        with pytest.raises(ConfigError, match=f"no ladder for method {name}"):
            load_sweep(path)


@pytest.mark.parametrize("name", NAMES)
def test_a_dry_run_shows_the_method_its_size_and_its_notes(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    path = _sweep_file(tmp_path, name)
    assert main(["sweep", str(path), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    sweep = load_sweep(path)
    assert plan["method"] == name and plan["runs"] and not plan["open_ended"]
    assert plan["total_runs"] == METHODS[name].total_runs(sweep, plan["runs"])
    assert plan["notes"] == sweep.notes()
    assert bool(plan["factors"]) == METHODS[name].factorial  # only a factorial design records its factors
    assert main(["sweep", str(path), "--dry-run"]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert title.startswith(f"sweep tiny: {METHODS[name].count(sweep, plan['runs'])}") and f"method {name}," in title


@pytest.mark.parametrize("name", [n for n, m in METHODS.items() if not m.factorial])
def test_a_method_that_draws_without_run_cap_is_open_ended(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    path = _sweep_file(tmp_path, name, "")
    assert load_sweep(path).open_ended
    with pytest.raises(ValueError, match="no fixed plan"):
        load_sweep(path).points()
    assert main(["sweep", str(path), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["open_ended"] and plan["total_runs"] is None and plan["runs"]
    assert main(["sweep", str(path), "--dry-run"]) == 0
    assert "open-ended: points are" in capsys.readouterr().out.splitlines()[0]
