"""Sweep files read as W&B reads them: numbers in any YAML form, inferred distributions, grids over ranges,
every distribution sampled as W&B's inverse CDF, probabilities, W&B's own keys, and hyperband's rule.

The example files here are written for these tests (every key and distribution W&B documents); the run
matrices expected of them are worked out by hand from W&B's rules.
"""

from __future__ import annotations

import math
import random
import textwrap

import numpy as np
import pytest
from scipy import stats

from ablate.errors import ConfigError
from ablate.sweep import load_sweep, plan_sweep
from ablate.sweep.hyperband import Hyperband
from ablate.sweep.params import Param
from tests.conftest import REPO, ablate_here

BASE = f"base: {{config: {REPO / 'configs/default.yaml'}, overrides: [train.max_steps=10]}}"


def _sweep(tmp_path, text: str):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    return load_sweep(path)


def test_numbers_in_any_yaml_form(tmp_path):
    sweep = _sweep(tmp_path, """
        method: random
        run_cap: 4
        parameters:
          train.lr: {min: 5e-4, max: 1e-2}
          train.label_smoothing: {value: 1.0e-1}
    """)
    lr = sweep.parameters["train.lr"]
    assert lr.distribution == "uniform" and lr.settings["min"] == 5e-4 and lr.settings["max"] == 1e-2
    assert sweep.parameters["train.label_smoothing"].settings["value"] == 0.1


@pytest.mark.parametrize("spec,distribution", [
    ({"min": 1, "max": 5}, "int_uniform"),
    ({"min": 1.0, "max": 4.0}, "uniform"),  # floats written as floats: W&B's schema infers uniform
    ({"min": 1, "max": 4.0}, "uniform"),
    ({"min": 0.1, "max": 0.5}, "uniform"),
    ({"min": 1, "max": 2.5}, "uniform"),
    ({"values": [1, 2]}, "categorical"),
    ({"values": [1, 2], "probabilities": [0.2, 0.8]}, "categorical_w_probabilities"),
    ({"value": 3}, "constant"),
    ({"distribution": "normal"}, "normal"),
])
def test_distributions_are_inferred_as_w_and_b_infers_them(spec, distribution):
    assert Param.parse("p", spec, "s").distribution == distribution


def test_defaults_are_filled_in():
    assert Param.parse("p", {"distribution": "normal"}, "s").settings == {"mu": 0.0, "sigma": 1.0}
    assert Param.parse("p", {"distribution": "beta"}, "s").settings == {"a": 1.0, "b": 1.0}
    assert Param.parse("p", {"distribution": "q_uniform", "min": 0, "max": 1}, "s").settings["q"] == 1.0


def test_grid_expands_integer_and_quantised_ranges_like_w_and_b(tmp_path):
    """int_uniform: every integer min..max; q_uniform: numpy.arange(min, max, q) (max itself excluded)."""
    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: grid
        parameters:
          model.n_layers: {{min: 1, max: 3}}
          model.dropout: {{distribution: q_uniform, min: 0.0, max: 0.3, q: 0.1}}
          train.label_smoothing: {{value: 0.0}}
    """)
    points = sweep.points()
    assert [(p.values["model.n_layers"], p.values["model.dropout"]) for p in points] == [
        (n, d) for d in (0.0, 0.1, 0.2) for n in (1, 2, 3)]  # W&B's order: names sorted, model.dropout first
    assert all(p.values["train.label_smoothing"] == 0.0 for p in points)


@pytest.mark.parametrize("spec", [
    {"distribution": "uniform", "min": 0, "max": 1},
    {"values": [1, 2], "probabilities": [0.5, 0.5]},
    {"distribution": "normal"},
])
def test_a_grid_takes_only_what_w_and_b_grids(tmp_path, spec):
    with pytest.raises(ConfigError, match="what W&B's grid search takes"):
        _sweep(tmp_path, f"method: grid\nparameters:\n  model.dropout: {spec}\n")


# (spec, the distribution of the values, as scipy freezes it, or a transform of them that is uniform)
CONTINUOUS = [
    ({"distribution": "uniform", "min": 2.0, "max": 5.0}, stats.uniform(2.0, 3.0), None),
    ({"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1}, stats.uniform(math.log(1e-4), math.log(1e3)),
     np.log),
    ({"distribution": "log_uniform", "min": -3.0, "max": 1.0}, stats.uniform(-3.0, 4.0), np.log),  # e^U(min, max)
    ({"distribution": "inv_log_uniform", "min": -1.0, "max": 2.0}, stats.uniform(-1.0, 3.0), lambda x: -np.log(x)),
    ({"distribution": "inv_log_uniform_values", "min": 0.01, "max": 10.0},
     stats.uniform(math.log(0.1), math.log(1000.0)), lambda x: np.log(1 / x)),
    ({"distribution": "normal", "mu": 1.0, "sigma": 2.0}, stats.norm(1.0, 2.0), None),
    ({"distribution": "log_normal", "mu": 0.5, "sigma": 0.3}, stats.lognorm(s=0.3, scale=math.exp(0.5)), None),
    ({"distribution": "beta", "a": 2.0, "b": 5.0}, stats.beta(2.0, 5.0), None),
]


@pytest.mark.parametrize("spec,dist,transform", CONTINUOUS, ids=[c[0]["distribution"] for c in CONTINUOUS])
def test_random_draws_follow_w_and_b_s_distributions(spec, dist, transform):
    param, rng = Param.parse("p", spec, "s"), random.Random(0)
    draws = np.array([param.sample(rng) for _ in range(4000)])
    values = transform(draws) if transform else draws
    assert stats.kstest(values, dist.cdf).pvalue > 0.01


@pytest.mark.parametrize("spec,multiple", [
    ({"distribution": "q_uniform", "min": 0, "max": 10, "q": 2}, 2),
    ({"distribution": "q_log_uniform_values", "min": 1, "max": 1000, "q": 5}, 5),
    ({"distribution": "q_normal", "mu": 0, "sigma": 10, "q": 0.5}, 0.5),
    ({"distribution": "q_beta", "a": 1, "b": 1, "q": 0.25}, 0.25),
    ({"distribution": "q_log_normal", "mu": 2, "sigma": 1, "q": 3}, 3),
    ({"distribution": "q_log_uniform", "min": 0, "max": 5, "q": 4}, 4),
])
def test_quantised_draws_are_multiples_of_q(spec, multiple):
    param, rng = Param.parse("p", spec, "s"), random.Random(1)
    for _ in range(200):
        x = param.sample(rng)
        assert abs(x / multiple - round(x / multiple)) < 1e-9
        assert isinstance(x, int) == isinstance(multiple, int)


def test_int_uniform_and_probabilities_draw_with_the_right_frequencies():
    rng = random.Random(2)
    ints = [Param.parse("p", {"min": 3, "max": 6}, "s").sample(rng) for _ in range(8000)]
    assert set(ints) == {3, 4, 5, 6} and all(abs(ints.count(v) / 8000 - 0.25) < 0.025 for v in (3, 4, 5, 6))
    weighted = Param.parse("p", {"values": ["a", "b", "c"], "probabilities": [0.1, 0.6, 0.3]}, "s")
    draws = [weighted.sample(rng) for _ in range(8000)]
    assert stats.chisquare([draws.count(v) for v in "abc"], [800, 4800, 2400]).pvalue > 0.01


@pytest.mark.parametrize("spec,message", [
    ({"values": [1, 2], "probabilities": [0.5, 0.6]}, r"probabilities.*sum to 1"),
    ({"min": 5, "max": 1}, r"numbers min < max"),
    ({"distribution": "log_uniform_values", "min": 0, "max": 1}, r"min=0 .*positive number for log_uniform_values"),
    ({"distribution": "gamma", "min": 0, "max": 1}, r"distribution='gamma' .*one of"),
    ({"distribution": "normal", "sigma": -1}, r"sigma=-1 .*positive number"),
    ({"valeus": [1]}, r"valeus=\[1\] .*a key of a W&B parameter"),
])
def test_bad_parameters_are_named(spec, message):
    with pytest.raises(ConfigError, match=message):
        Param.parse("model.dropout", spec, "s")


def test_w_and_b_keys_are_used_or_named(tmp_path):
    sweep = _sweep(tmp_path, f"""
        {BASE}
        name: keys
        description: every top-level key W&B documents
        method: random
        run_cap: 2
        controller: {{type: local}}
        project: my-project
        entity: my-team
        program: train.py
        command: [python, train.py]
        metric: {{name: val/loss, goal: minimize, target: 0.5}}
        early_terminate: {{type: hyperband, min_iter: 3}}
        parameters:
          model.dropout: {{values: [0.0, 0.1]}}
    """)
    assert sweep.description == "every top-level key W&B documents" and sweep.target == 0.5
    assert sweep.ignored == ["program", "command"] and sweep.early_terminate.bands[:3] == (3, 9, 27)
    runs = plan_sweep(sweep, tmp_path / "out")
    from ablate.sweep import run_config

    cfg = run_config(sweep, runs[0].overrides, None, labels=runs[0].labels)
    assert (cfg.wandb.project, cfg.wandb.entity) == ("my-project", "my-team")
    out = ablate_here("sweep", str(sweep.path), "--dry-run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if "warning" in line]
    assert warnings == [f"ablate: warning: {sweep.path}: program, command not used: ablate runs its own training "
                        "(ablate train) for every run"]


# W&B's hyperband rule, on the example of its own engine's documentation: max_iter 5, eta 2, s 2 give bands 1 and 2;
# thresholds: band 1 sorted [10, 10, 10, 10, 10][int(5 / 2)] = 10, band 2 sorted [6, 7, 8, 9, 10][2] = 8.
HISTORIES = {"a": [10, 9], "b": [10, 10], "c": [10, 8, 8], "d": [10, 7, 7], "e": [10, 6, 6]}


def test_hyperband_stops_what_w_and_b_s_rule_stops():
    rule = Hyperband.parse({"type": "hyperband", "max_iter": 5, "eta": 2, "s": 2}, "s")
    assert rule.bands == (1, 2)
    assert rule.thresholds(list(HISTORIES.values())) == [10, 8]
    stop = rule.to_stop(HISTORIES, running=["b", "c", "d"], goal="minimize")
    assert list(stop) == ["b"] and "iteration 2" in stop["b"]  # 10 > 8; c sits on the threshold, d below it
    flipped = {k: [-v for v in h] for k, h in HISTORIES.items()}
    assert list(rule.to_stop(flipped, ["b", "c", "d"], "maximize")) == ["b"]  # the same, for a metric to maximize


def test_strict_judges_the_band_s_value_and_loose_the_best_so_far():
    """min_iter 2, eta 3: band 2's threshold is sorted [5, 9][int(2 / 3)] = 5; y logged 1 then 9."""
    histories, running = {"x": [5, 5], "y": [1, 9]}, ["y"]
    strict = Hyperband.parse({"type": "hyperband", "min_iter": 2, "eta": 3}, "s")
    loose = Hyperband.parse({"type": "hyperband", "min_iter": 2, "eta": 3, "strict": False}, "s")
    assert list(strict.to_stop(histories, running, "minimize")) == ["y"]  # its value at iteration 2: 9 > 5
    assert loose.to_stop(histories, running, "minimize") == {}  # its best so far: 1 <= 5


def test_hyperband_min_iter_bands_grow_by_eta():
    assert Hyperband.parse({"type": "hyperband", "min_iter": 2, "eta": 3}, "s").bands[:4] == (2, 6, 18, 54)
    with pytest.raises(ConfigError, match="early_terminate.*min_iter, or max_iter with s"):
        Hyperband.parse({"type": "hyperband"}, "s")
    with pytest.raises(ConfigError, match=r"early_terminate.eta=1"):
        Hyperband.parse({"type": "hyperband", "min_iter": 1, "eta": 1}, "s")


def test_every_key_ablate_does_not_honour_is_named_and_the_controller_is_read(tmp_path):
    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: grid
        controller: {{type: cloud}}
        job: my-job
        image_uri: docker.io/me/img
        scheduler: {{num_workers: 2}}
        apiVersion: v1
        kind: sweep
        parameters:
          model.dropout: {{values: [0.0, 0.1]}}
    """)
    assert sweep.ignored == ["job", "image_uri", "scheduler", "apiVersion", "kind"]
    assert len(plan_sweep(sweep, tmp_path / "out")) == 2
    ignored, controller = sweep.notes()
    assert "job, image_uri, scheduler, apiVersion, kind not used" in ignored
    assert controller.startswith("controller: {type: cloud} not used: ablate's own pool chooses the points")
    assert sweep.notes("wandb") == [ignored]  # W&B's server is the cloud controller
    local = _sweep(tmp_path, f"{BASE}\ncontroller: {{type: local}}\n")
    assert local.notes() == [] and local.notes("wandb") == [
        "controller: {type: local} not used: with --backend wandb, W&B's server chooses the points"]
    with pytest.raises(ConfigError, match="controller=.*expected {type: local} or {type: cloud}"):
        _sweep(tmp_path, f"{BASE}\ncontroller: {{type: remote}}\n")


@pytest.mark.parametrize("distribution,instead", [("log_uniform", "log_uniform_values"),
                                                  ("q_log_uniform", "q_log_uniform_values"),
                                                  ("inv_log_uniform", "inv_log_uniform_values")])
def test_w_and_b_s_deprecated_forms_warn_as_w_and_b_does(tmp_path, distribution, instead):
    q = ", q: 0.001" if "q_" in distribution else ""
    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: random
        run_cap: 3
        parameters:
          train.grad_clip: {{distribution: {distribution}, min: -4, max: -1{q}}}
    """)
    (note,) = sweep.notes()
    assert f"{distribution} is deprecated in W&B" in note and instead in note
    values = [r.varied["train.grad_clip"] for r in plan_sweep(sweep, tmp_path / "out")]
    lo, hi = (math.exp(-4), math.exp(-1)) if distribution != "inv_log_uniform" else (math.exp(1), math.exp(4))
    assert all(lo - 0.001 <= v <= hi + 0.001 for v in values)  # e^U(min, max) (to q), or e^-U for the inverse
