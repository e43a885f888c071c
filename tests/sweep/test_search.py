"""Methods and stopping rules, run locally: bayes (Optuna's Gaussian process) against random search on a toy
objective and end to end; W&B's hyperband stopping runs in a real pool; metric.target ending a sweep."""

from __future__ import annotations

import json
import math
import random
import textwrap
from pathlib import Path

import pytest

from ablate.sweep import load_sweep
from ablate.sweep.bayes import BayesSearch
from tests.conftest import REPO, TINY
from tests.sweep.conftest import ablate_here, plan_of, run_statuses, write_sweep

QUICK = TINY + ["train.log_every=2", "trainer.enable_progress_bar=false", "logger=none"]


def _toy(tmp_path: Path):
    path = tmp_path / "toy.yaml"
    path.write_text(textwrap.dedent("""
        method: bayes
        run_cap: 16
        metric: {name: val/loss, goal: minimize}  # the search is driven by _f below
        parameters:
          x: {distribution: uniform, min: -2.0, max: 2.0}
          y: {distribution: log_uniform_values, min: 0.001, max: 1.0}
    """))
    return load_sweep(path)


def _f(values: dict) -> float:
    """A quadratic bowl, its minimum (0) at x = 0.7, y = 0.01 (log scale)."""
    return (values["x"] - 0.7) ** 2 + (math.log10(values["y"]) + 2) ** 2


@pytest.mark.slow
def test_bayes_finds_a_better_point_than_random_search_on_a_quadratic(tmp_path):
    sweep, budget, bayes_best, random_best = _toy(tmp_path), 20, [], []
    for seed in range(3):
        sweep.sampler_seed = seed
        search = BayesSearch(sweep)
        scores = []
        for _ in range(budget):
            number, u = search.ask()
            scores.append(_f(search.point(u, None).values))
            search.tell(number, scores[-1])
        bayes_best.append(min(scores))
        rng = random.Random(seed)  # W&B's random search: each parameter drawn from its distribution
        random_best.append(min(_f({k: p.sample(rng) for k, p in sweep.searched.items()}) for _ in range(budget)))
    assert sum(bayes_best) / 3 < sum(random_best) / 3
    assert max(bayes_best) < 0.05  # it homes in on the minimum


@pytest.mark.slow
def test_a_local_bayes_sweep_runs_plans_as_it_goes_and_resumes(tmp_path):
    overrides = ", ".join(QUICK + ["train.max_steps=4", "train.val_every=2"])
    path = write_sweep(tmp_path, f"""
        name: bo
        method: bayes
        run_cap: 3
        base: {{config: {REPO / 'configs/default.yaml'}, overrides: [{overrides}]}}
        parameters:
          model.dropout: {{min: 0.0, max: 0.3}}
    """)
    out = ablate_here("sweep", str(path), "--workers", "1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = tmp_path / "sweeps" / "bo"
    runs = plan_of(sweep_dir)["runs"]
    assert len(runs) == 3 and run_statuses(sweep_dir) == ["finished"] * 3
    assert [r["search"]["trial"] for r in runs] == [0, 1, 2]
    assert all(0.0 <= r["varied"]["model.dropout"] <= 0.3 for r in runs)
    again = ablate_here("sweep", str(path), "--workers", "1", cwd=tmp_path)
    assert again.returncode == 0 and len(plan_of(sweep_dir)["runs"]) == 3  # nothing new: the cap is reached


@pytest.mark.slow
@pytest.mark.parametrize("fuse", ["off", "on"])
def test_hyperband_stops_the_runs_its_rule_stops(fuse, tmp_path):
    """A learning run, then two seeds of a run that cannot learn (lr 1e-8): solo runs one after the other
    (``--fuse off``), or the two seeds as one 2-member seed array (``--fuse on``). At iteration 2 a stuck run's loss
    is worse than the best of the two or three runs there, so W&B's rule (min_iter 2, eta 4: position
    floor(n / 4) = 0) stops it; the learning run, alone at each of its iterations, passes. The stuck runs are given
    400 steps, so they cannot finish before the pool's next look (every 2 s) however fast this machine is."""
    overrides = json.dumps(QUICK + ["train.max_steps=40", "train.val_every=5", "train.schedule=constant",
                                    "train.schedule_args={warmup: 0}"])[1:-1]  # JSON strings: valid YAML
    path = write_sweep(tmp_path, f"""
        name: hb
        early_terminate: {{type: hyperband, min_iter: 2, eta: 4}}
        base: {{config: {REPO / 'configs/default.yaml'}, overrides: [{overrides}]}}
        rows:
          - {{name: good, train.lr: 3.0e-3, seed: 0}}
          - {{name: stuck, train.lr: 1.0e-8, train.max_steps: 400, seed: 0}}
          - {{name: stuck again, train.lr: 1.0e-8, train.max_steps: 400, seed: 1}}
    """)
    out = ablate_here("sweep", str(path), "--workers", "1", "--fuse", fuse, cwd=tmp_path)
    sweep_dir = tmp_path / "sweeps" / "hb"
    assert run_statuses(sweep_dir) == ["finished", "stopped", "stopped"], out.stderr[-3000:]
    stuck = [json.loads((sweep_dir / run["run_dir"] / "result.json").read_text())
             for run in plan_of(sweep_dir)["runs"][1:]]
    for result in stuck:
        assert result["stopped_because"].startswith("stopped by hyperband at iteration") and result["step"] < 400
    if fuse == "on":  # the two seeds trained as one array, each stopped as a member of it
        assert [r["fused"]["index"] for r in stuck] == [0, 1] and {r["fused"]["members"] for r in stuck} == {2}
        assert stuck[0]["fused"]["array"] == stuck[1]["fused"]["array"]
    else:
        assert not any("fused" in r for r in stuck)
    assert "2 runs stopped early by hyperband" in out.stderr and out.returncode == 0
    from ablate.report import build_report

    c = next(r for r in build_report(sweep_dir).variants if r.name == "stuck").comparison  # against "good"
    assert c.step is not None and c.step <= stuck[0]["step"] and "stopped early" in c.reason


@pytest.mark.slow
def test_no_run_starts_once_one_reaches_the_metric_target(tmp_path):
    overrides = ", ".join(QUICK + ["train.max_steps=4", "train.val_every=2"])
    path = write_sweep(tmp_path, f"""
        name: tg
        metric: {{name: val/loss, goal: minimize, target: 100.0}}
        base: {{config: {REPO / 'configs/default.yaml'}, overrides: [{overrides}]}}
        rows: [{{name: a}}, {{name: b, model.dropout: 0.2}}, {{name: c, model.dropout: 0.3}}]
    """)
    out = ablate_here("sweep", str(path), "--workers", "1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert run_statuses(tmp_path / "sweeps" / "tg") == ["finished", "missing", "missing"]
    assert "no further run started" in out.stderr and "reached metric.target: val/loss" in out.stderr
