"""Every registered search method (:data:`ablate.sweep.methods.METHODS`) goes through the generic path: a sweep file
naming it is read and checked, planned and shown by a dry run, as text and as JSON, capped and open-ended.

What each method should do with the one tiny file these tests share is written out in ``EXPECTED``, worked out by hand
from W&B's rules (a grid runs the cartesian product of the values, each cell once per listed seed; random draws
every parameter anew for each point; bayes chooses its points as runs finish), never asked of the method under test.
A method added to the registry fails here until its line is written. Random's draws are checked against the
distributions the file states (a KS test for a log-uniform, a chi-square test for values), and the grid's points
against ``itertools.product``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.cli import main
from ablate.errors import ConfigError
from ablate.sweep import load_sweep
from ablate.sweep.methods import METHODS, SearchMethod, method_named
from tests.conftest import REPO

BASE = f"base: {{config: {REPO / 'configs/default.yaml'}, overrides: [train.max_steps=10]}}"
NAMES = list(METHODS)
DROPOUTS, SEEDS = (0.0, 0.1), (0, 1)  # _sweep_file's parameters: model.dropout's values and the listed seeds
REPLICATES = "parameters.seed: values are replicates"  # the note of a method that draws points but lists seeds
OPTUNA = "method: bayes is searched here by Optuna's Gaussian process"


@dataclass(frozen=True)
class Expected:
    """What a method does with ``_sweep_file``'s file (run_cap 4), by W&B's rules."""

    takes_uniform: bool  # W&B's grid takes discrete values only; random and bayes sample a range
    planned: int  # runs a dry run plans now
    total: int  # runs the sweep makes
    count: str  # the dry run's words for its size
    notes: tuple[str, ...]  # how each of its notes begins


EXPECTED = {
    "grid": Expected(False, 4, 4, "4 runs", ()),  # 2 dropouts x 2 seeds: every cell, under run_cap 4
    "random": Expected(True, 4, 4, "4 runs", (REPLICATES,)),  # run_cap 4 runs: 2 points drawn, each once per seed
    "bayes": Expected(True, 2, 4, "up to 4 runs, chosen as runs finish; the first point's", (REPLICATES, OPTUNA)),
}


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


def test_every_registered_method_has_its_expected_behaviour_written_here():
    assert set(EXPECTED) == set(METHODS)


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
def test_a_range_is_taken_by_a_method_that_samples_and_refused_by_a_grid(tmp_path, name):
    path = tmp_path / "uniform.yaml"
    path.write_text(f"{BASE}\nmethod: {name}\nrun_cap: 2\nparameters:\n  model.dropout: {{min: 0.0, max: 0.2}}\n")
    if EXPECTED[name].takes_uniform:
        assert load_sweep(path).search is METHODS[name]
    else:
        with pytest.raises(ConfigError, match=re.escape(f"{path}: parameters.model.dropout='uniform' is not allowed")
                           + ".*what W&B's grid search takes"):
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
    expected = EXPECTED[name]
    assert plan["method"] == name and not plan["open_ended"]
    assert len(plan["runs"]) == expected.planned and plan["total_runs"] == expected.total
    assert len(plan["notes"]) == len(expected.notes)
    assert all(note.startswith(start) for note, start in zip(plan["notes"], expected.notes)), plan["notes"]
    assert bool(plan["factors"]) == METHODS[name].factorial  # only a factorial design records its factors
    cells = [(r["varied"]["model.dropout"], r["seed"]) for r in plan["runs"]]
    if METHODS[name].factorial:
        assert sorted(cells) == sorted(itertools.product(DROPOUTS, SEEDS))  # every cell once
    else:  # each point drawn from the values, run once per listed seed, in order
        points = [cells[i:i + len(SEEDS)] for i in range(0, len(cells), len(SEEDS))]
        assert all([s for _, s in p] == list(SEEDS) and len({d for d, _ in p}) == 1 and p[0][0] in DROPOUTS
                   for p in points), cells
    assert main(["sweep", str(path), "--dry-run"]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert title.startswith(f"sweep tiny: {expected.count}, method {name},"), title


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


def test_a_grid_runs_every_combination_of_the_values_once(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(f"{BASE}\nmethod: grid\nparameters:\n  model.dropout: {{values: [0.0, 0.1, 0.2]}}\n"
                    "  train.label_smoothing: {values: [0.0, 0.1]}\n")
    points = [(p.values["model.dropout"], p.values["train.label_smoothing"]) for p in load_sweep(path).points()]
    assert sorted(points) == sorted(itertools.product([0.0, 0.1, 0.2], [0.0, 0.1]))


def test_random_draws_each_point_from_the_distributions_the_file_states(tmp_path):
    """3,000 points: log(train.lr) uniform on [log 1e-4, log 1e-1] (KS), model.dropout's three values equally often
    (chi-square), and the two drawn independently (chi-square on the joint counts of lr's halves and the values)."""
    path = tmp_path / "random.yaml"
    path.write_text(f"{BASE}\nmethod: random\nrun_cap: 3000\nparameters:\n"
                    "  train.lr: {distribution: log_uniform_values, min: 1.0e-4, max: 1.0e-1}\n"
                    "  model.dropout: {values: [0.0, 0.1, 0.2]}\n")
    points = load_sweep(path).points()
    lr = np.log([p.values["train.lr"] for p in points])
    dropout = [p.values["model.dropout"] for p in points]
    assert len(points) == 3000 and lr.min() >= math.log(1e-4) and lr.max() <= math.log(1e-1)
    assert stats.kstest(lr, stats.uniform(math.log(1e-4), math.log(1e3)).cdf).pvalue > 0.01
    assert stats.chisquare([dropout.count(v) for v in (0.0, 0.1, 0.2)]).pvalue > 0.01
    low = lr < math.log(1e-4) + math.log(1e3) / 2
    joint = [[sum(1 for lo, d in zip(low, dropout) if lo == half and d == v) for v in (0.0, 0.1, 0.2)]
             for half in (True, False)]
    assert stats.chi2_contingency(joint).pvalue > 0.01
