"""Sweeps through W&B: what is registered, and agents that train the same runs as the local pool.

There is no W&B server here: an agent's call is simulated as wandb's own agent makes it (the run id, the sweep
id and the point's parameter file in the environment, offline mode), and the offline ``.wandb`` records of its
runs are compared with those of the same sweep run locally.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import textwrap
from pathlib import Path

import pytest
import yaml

from ablate.errors import ConfigError
from ablate.sweep import load_sweep, plan_sweep
from ablate.sweep.plan import Planner
from ablate.sweep.wandb_backend import (EXTRA, LADDER, ROW, SWEEP, agent_trial, point_of, run_agent,
                                         start_wandb_sweep, step_of, sweep_folder, to_wandb)
from tests.conftest import REPO, TINY
from tests.runs.wandb_records import RunLog

QUICK = TINY[1:] + ["train.max_steps=4", "train.val_every=2", "trainer.enable_progress_bar=false"]  # W&B on
SWEEP_TEXT = f"""
    name: agents
    description: rows, a sampled parameter and two seeds
    method: grid
    metric: {{name: val/loss, goal: minimize}}
    early_terminate: {{type: hyperband, min_iter: 2}}
    base: {{config: {REPO / 'configs/default.yaml'}, overrides: {json.dumps(QUICK)}}}
    rows:
      - {{name: base}}
      - {{name: wide, model.d_ff: 128}}
    parameters:
      model.dropout: {{values: [0.0, 0.2]}}
      seed: {{values: [0, 1]}}
"""


def _sweep_file(folder: Path) -> Path:
    path = folder / "s.yaml"
    path.write_text(textwrap.dedent(SWEEP_TEXT))
    return path


def test_the_registered_sweep_is_plain_w_and_b_with_seeds_as_replicates(tmp_path):
    sweep = load_sweep(_sweep_file(tmp_path))
    wb = to_wandb(sweep, ["data.batch_size=8"])
    yaml.safe_dump(wb)  # plain data
    assert set(wb["parameters"]) == {"model.dropout", ROW, SWEEP, EXTRA}  # no seed: each point runs every seed
    assert wb["parameters"][ROW] == {"values": ["base", "wide"]}
    assert wb["parameters"]["model.dropout"] == {"values": [0.0, 0.2]}
    assert wb["early_terminate"] == {"type": "hyperband", "min_iter": 2} and wb["description"].startswith("rows")
    assert json.loads(wb["parameters"][EXTRA]["value"]) == ["data.batch_size=8"]
    assert load_sweep(_write(tmp_path / "copy.yaml", wb["parameters"][SWEEP]["value"])).raw == sweep.raw


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_every_point_w_and_b_hands_out_plans_the_local_runs(tmp_path):
    sweep = load_sweep(_sweep_file(tmp_path))
    local = {r.id for r in plan_sweep(sweep, tmp_path)}
    remote = set()
    for row in ("base", "wide"):
        for dropout in (0.0, 0.2):
            r, sampled = point_of({ROW: row, "model.dropout": dropout}, sweep)
            remote |= {run.id for run in Planner(sweep).plan([sweep.point(r, sampled, s) for s in sweep.seeds])}
    assert remote == local


def test_a_ladder_is_one_more_parameter_for_w_and_b_and_its_points_plan_the_local_runs(tmp_path):
    path = _sweep_file(tmp_path)
    path.write_text(path.read_text() + "ladder: [{name: S, model.d_model: 32}, {name: L, model.d_model: 48}]\n")
    sweep = load_sweep(path)
    wb = to_wandb(sweep)
    assert wb["parameters"][LADDER] == {"values": ["S", "L"]}
    remote = set()
    for row in ("base", "wide"):
        for dropout in (0.0, 0.2):
            for step in ("S", "L"):
                params = {ROW: row, "model.dropout": dropout, LADDER: step}
                r, sampled = point_of(params, sweep)
                points = [sweep.point(r, sampled, s, step_of(params, sweep)) for s in sweep.seeds]
                remote |= {run.id for run in Planner(sweep).plan(points)}
    assert remote == {r.id for r in plan_sweep(sweep, tmp_path)}
    with pytest.raises(ConfigError, match="ladder='XL'.*one of S, L"):
        step_of({LADDER: "XL"}, sweep)


def test_a_point_that_is_not_in_the_sweep_is_named(tmp_path):
    sweep = load_sweep(_sweep_file(tmp_path))
    with pytest.raises(ConfigError, match="row='narrow'.*one of base, wide"):
        point_of({ROW: "narrow", "model.dropout": 0.0}, sweep)


def test_registering_validates_every_listed_run_first(tmp_path):
    path = _write(tmp_path / "bad.yaml", textwrap.dedent(f"""
        name: bad
        base: {REPO / 'configs/default.yaml'}
        parameters:
          model.n_heads: {{values: [4, 5]}}
    """))
    with pytest.raises(ConfigError, match="model.n_heads=5 .*divisor"):
        start_wandb_sweep(load_sweep(path), extra=[], dry_run=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"" for p in sorted(root.rglob("*"))}


def test_an_agent_claims_its_sweep_folder_as_the_local_pool_does(tmp_path, monkeypatch):
    """Issue 27: ``sweeps/<name>`` of a W&B sweep is the local sweep's folder, claimed the same way: one the local pool
    launched with the same overrides (in any order) is this sweep's; one of other overrides, of another kind or of
    someone's files is refused before anything is written (the sweep file, plan.json)."""
    from ablate.sweep.launch import _claim

    monkeypatch.chdir(tmp_path)
    sweep = load_sweep(_sweep_file(tmp_path))
    text = to_wandb(sweep)["parameters"][SWEEP]["value"]
    _claim(sweep, Path("sweeps/agents"), ["model.dropout=0.1", "train.max_steps=3"], write=True)
    point = {ROW: "base", "model.dropout": 0.0, SWEEP: text}
    before = _tree(tmp_path)
    assert sweep_folder({**point, EXTRA: json.dumps(["train.max_steps=3", "model.dropout=0.1"])}) == \
        Path("sweeps/agents")
    assert _tree(tmp_path) == before
    (tmp_path / "sweeps" / "mine").mkdir()
    (tmp_path / "sweeps" / "mine" / "notes.txt").write_text("a researcher's notes\n")
    before = _tree(tmp_path)
    for params, message in [({**point, EXTRA: json.dumps(["model.dropout=0.2", "train.max_steps=3"])},
                             "belongs to another sweep: overrides"),
                            ({**point, SWEEP: text.replace("name: agents", "name: mine"), EXTRA: "[]"},
                             "a folder of files ablate did not write"),
                            ({**point, SWEEP: text.replace("name: agents", "name: ../agents"), EXTRA: "[]"},
                             "a name, not a path"),
                            ({**point, EXTRA: "model.dropout=0.1"}, "a JSON list of key=value overrides")]:
        with pytest.raises(ConfigError, match=message):
            agent_trial(params)
        assert _tree(tmp_path) == before


def test_an_agent_checks_its_sweep_folder_before_it_joins(tmp_path, monkeypatch):
    """``ablate agent`` asks W&B for the sweep it joins and refuses this machine's folder of it before any point."""
    import wandb

    from ablate.cli import main

    monkeypatch.chdir(tmp_path)
    sweep = load_sweep(_sweep_file(tmp_path))
    registered = to_wandb(sweep, ["model.dropout=0.1"])
    (tmp_path / "sweeps" / "agents").mkdir(parents=True)
    (tmp_path / "sweeps" / "agents" / "notes.txt").write_text("a researcher's notes\n")
    monkeypatch.setattr("ablate.sweep.wandb_backend._require_key", lambda *a: None)
    monkeypatch.setattr(wandb, "Api", lambda: type("Api", (), {"sweep": lambda self, path: type(
        "Sweep", (), {"config": registered})()})())
    joined = []
    monkeypatch.setattr(wandb, "agent", lambda *a, **k: joined.append(a))
    before = _tree(tmp_path)
    assert main(["agent", "e/p/s1"]) == 2 and not joined
    assert _tree(tmp_path) == before
    (tmp_path / "sweeps" / "agents" / "notes.txt").unlink()
    assert run_agent("e/p/s1") == 0 and joined  # an empty folder is taken


def _offline(root: Path) -> dict[str, RunLog]:
    """Every offline W&B run under ``root`` (all segments of a run id merged into the first), by run id."""
    logs: dict[str, RunLog] = {}
    for path in sorted(root.rglob("run-*.wandb")):
        log = RunLog(path)
        if log.run.run_id in logs:
            logs[log.run.run_id].summary.update(log.summary)
        else:
            logs[log.run.run_id] = log
    return logs


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "NETRC"}
    return {**env, "HOME": str(home), "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_an_agent_trains_the_same_runs_as_the_local_pool(tmp_path):
    local, agent = tmp_path / "local", tmp_path / "agent"
    local.mkdir(), agent.mkdir()
    out = subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", str(_sweep_file(local)), "--workers", "2"],
                         cwd=local, env=_env(tmp_path / "home1"), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = load_sweep(_sweep_file(agent))
    wb = to_wandb(sweep)
    point = {ROW: "wide", "model.dropout": 0.2, SWEEP: wb["parameters"][SWEEP]["value"], EXTRA: "[]"}
    params = agent / "wandb" / "sweep-fake" / "config-agentrun1.yaml"  # where wandb's agent writes it
    params.parent.mkdir(parents=True)
    params.write_text(yaml.safe_dump({k: {"value": v} for k, v in point.items()}))
    env = {**_env(tmp_path / "home2"), "WANDB_MODE": "offline", "WANDB_RUN_ID": "agentrun1", "WANDB_SWEEP_ID": "fake",
           "WANDB_SWEEP_PARAM_PATH": str(params)}
    trial = subprocess.run([sys.executable, "-c", "from ablate.sweep.wandb_backend import _agent_function; "
                            "_agent_function()"], cwd=agent, env=env, capture_output=True, text=True, timeout=600)
    assert trial.returncode == 0, trial.stderr[-3000:]

    plan = json.loads((agent / "sweeps" / "agents" / "plan.json").read_text())["runs"]
    local_plan = {r["id"]: r for r in json.loads((local / "sweeps" / "agents" / "plan.json").read_text())["runs"]}
    assert [r["variant"] for r in plan] == ["wide, dropout=0.2"] * 2 and {r["id"] for r in plan} <= set(local_plan)
    for entry in plan:  # the same run directories, and the same trained runs
        assert (agent / "sweeps" / "agents" / entry["run_dir"] / "result.json").is_file()
        assert (local / "sweeps" / "agents" / entry["run_dir"] / "result.json").is_file()
    local_logs = {log.run.display_name: log for log in _offline(local / "sweeps").values()}
    agent_logs = _offline(agent / "sweeps")
    assert "agentrun1" in agent_logs  # the first seed trained as the agent's own run: the controller sees it
    for log in agent_logs.values():
        twin = local_logs[log.run.display_name]
        assert (list(log.run.tags), log.run.job_type) == (list(twin.run.tags), twin.run.job_type)
        # each folder its own group: the agent's is its W&B sweep's (every machine's agents), the local one's its own
        assert log.run.run_group == log.config["sweep"] == "agents-fake" != twin.run.run_group == twin.config["sweep"]
        groups = ("sweep", "wandb.group")
        same = {k: v for k, v in log.config.items() if k in twin.config and k not in groups}
        assert same == {k: v for k, v in twin.config.items() if k not in groups}  # every key of the local run
        assert set(log.config) - set(twin.config) <= {SWEEP, EXTRA, "_wandb"}  # W&B's own sweep keys besides
    seeds = [agent_logs[k] for k in agent_logs if k != "agentrun1"]
    first, other = agent_logs["agentrun1"], seeds[0]
    assert first.run.display_name == "wide, dropout=0.2, seed=0" and other.run.display_name.endswith("seed=1")
    finals = [json.loads((agent / "sweeps" / "agents" / e["run_dir"] / "result.json").read_text())["final"]["val/loss"]
              for e in plan]
    assert first.summary["val/loss"] == pytest.approx(sum(finals) / 2)  # the point's score: the mean of its seeds


def test_w_and_b_stopping_a_point_stops_its_run_as_hyperband_does(tmp_path, monkeypatch):
    """W&B's agent stops a point by raising ``Exception`` in the thread that runs it (``_terminate_thread``, called
    here as the agent calls it): the run is asked to stop through its STOP file, saves its step, is recorded
    *stopped* with W&B's word, and the point's second seed does not train."""
    from wandb.agents.pyagent import _terminate_thread

    from ablate.sweep.wandb_backend import STOPPED_BY_W_AND_B

    long = json.dumps(TINY[1:] + ["train.max_steps=100000", "train.val_every=2", "trainer.enable_progress_bar=false"])
    text = textwrap.dedent(SWEEP_TEXT).replace(json.dumps(QUICK), long)
    sweep = load_sweep(_write(tmp_path / "s.yaml", text))
    point = {ROW: "base", "model.dropout": 0.0, SWEEP: to_wandb(sweep)["parameters"][SWEEP]["value"], EXTRA: "[]"}
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "wandb" / "sweep-fake" / "config-agentrun1.yaml"  # where wandb's agent writes it
    params.parent.mkdir(parents=True)
    params.write_text(yaml.safe_dump({k: {"value": v} for k, v in point.items()}))
    agent = {"WANDB_MODE": "offline", "WANDB_RUN_ID": "agentrun1", "WANDB_SWEEP_ID": "fake",
             "WANDB_SWEEP_PARAM_PATH": str(params)}
    for key in [k for k in os.environ if k.startswith("WANDB_") or k == "NETRC"]:
        monkeypatch.delenv(key)
    for key, value in {"HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1", **agent}.items():
        monkeypatch.setenv(key, value)
    first, second = Planner(sweep, []).plan([sweep.point({"name": "base"}, {"model.dropout": 0.0}, seed)
                                             for seed in sweep.seeds])
    dirs: list[Path] = []
    trial = threading.Thread(target=lambda: dirs.extend(agent_trial(point)))
    trial.start()
    progress = tmp_path / "sweeps" / "agents" / first.run_dir / "progress.json"
    deadline = time.monotonic() + 300
    while not progress.is_file() and trial.is_alive():  # the run has validated: it is training
        assert time.monotonic() < deadline, "the point's first run never validated"
        trial.join(0.1)
    _terminate_thread(trial)
    trial.join(300)
    assert not trial.is_alive()
    result = json.loads((tmp_path / "sweeps" / "agents" / first.run_dir / "result.json").read_text())
    assert (result["status"], result["stopped_because"]) == ("stopped", STOPPED_BY_W_AND_B)
    assert 2 <= result["step"] < 100000 and (tmp_path / "sweeps" / "agents" / first.run_dir / "checkpoints" /
                                             "last.ckpt").is_file()
    assert [d.resolve() for d in dirs] == [tmp_path / "sweeps" / "agents" / first.run_dir]
    assert not (tmp_path / "sweeps" / "agents" / second.run_dir / "result.json").exists()
    log = next(iter(_offline(tmp_path / "sweeps").values()))
    assert log.run.run_id == "agentrun1"  # it trained as the agent's own run, in its own process


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
