"""Sweeps through W&B: its controller spreads runs over machines; ablate's extensions travel as plain values.

W&B passes a run's parameters as flat values, and its ``${args}`` would turn nested ones into
Python reprs nobody can parse. So a sweep goes to W&B in plain form: each paired row becomes
one value of a categorical parameter ``row``, and the rows' contents, the base config and its
overrides ride along as fixed JSON strings (``ablate.*``) that :func:`from_wandb` turns back
into overrides. Agents run ablate's own training in-process (``wandb.agent(function=...)``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.sweep.spec import Sweep, _row_values, _yaml_value

ROW = "row"
PREFIX = "ablate."


def to_wandb(sweep: Sweep, extra: list[str] = ()) -> dict[str, Any]:
    """The W&B sweep configuration of an ablate sweep (plain parameters only)."""
    params: dict[str, Any] = {k: dict(v) for k, v in sweep.parameters.items()}
    if sweep.rows:
        params[ROW] = {"values": [r["name"] for r in sweep.rows]}
    rows = {r["name"]: [f"{k}={_yaml_value(v)}" for k, v in _row_values(r).items()] for r in sweep.rows}
    params[PREFIX + "rows"] = {"value": json.dumps(rows)}
    params[PREFIX + "base"] = {"value": str(sweep.base_config or "")}
    params[PREFIX + "overrides"] = {"value": json.dumps([*sweep.base_overrides, *extra])}
    params[PREFIX + "sweep"] = {"value": sweep.name}
    out = {"name": sweep.name, "method": sweep.method, "metric": dict(sweep.metric), "parameters": params}
    if sweep.run_cap:
        out["run_cap"] = sweep.run_cap
    return out


def from_wandb(config: dict[str, Any]) -> tuple[str | None, list[str], str]:
    """A W&B run's config -> (base config path, overrides in order, sweep name)."""
    rows = json.loads(config.get(PREFIX + "rows", "{}"))
    overrides = list(json.loads(config.get(PREFIX + "overrides", "[]")))
    if ROW in config:
        if config[ROW] not in rows:
            raise ConfigError(ROW, config[ROW], f"one of {', '.join(rows)}", "W&B sweep")
        overrides += rows[config[ROW]]
    overrides += [f"{k}={_yaml_value(v)}" for k, v in config.items() if k != ROW and not k.startswith(PREFIX)]
    return config.get(PREFIX + "base") or None, overrides, config.get(PREFIX + "sweep", "wandb")


def _require_online() -> None:
    from ablate.runs.wandb import resolve_mode

    if resolve_mode("auto") != "online":
        raise ConfigError("--backend", "wandb", "a configured W&B API key (run `wandb login`); offline, use the "
                          "local backend", "command line")


def start_wandb_sweep(sweep: Sweep, *, extra: list[str], dry_run: bool) -> int:
    """Register the sweep with W&B and start one agent per local GPU (one on a CPU machine)."""
    config = to_wandb(sweep, extra)
    if dry_run:
        print(json.dumps(config, indent=2))
        return 0
    _require_online()
    import torch
    import wandb

    sweep_id = wandb.sweep(config, project=sweep.raw.get("project"), entity=sweep.raw.get("entity"))
    print(f"W&B sweep {sweep_id}: join from any machine with `ablate agent {sweep_id}`")
    gpus = [str(i) for i in range(torch.cuda.device_count())] or [None]
    agents = [subprocess.Popen([sys.executable, "-m", "ablate.cli", "agent", sweep_id],
                               env={**os.environ, **({"CUDA_VISIBLE_DEVICES": g} if g else {})}) for g in gpus]
    return max(a.wait() for a in agents)


def _agent_run() -> None:
    import wandb

    from ablate.config import load_config
    from ablate.config.load import INTERNAL
    from ablate.runs.files import config_hash
    from ablate.train.run import train

    run = wandb.init()
    base, overrides, name = from_wandb(dict(run.config))
    internal = ["logger=wandb", f"wandb.group={_yaml_value(name)}"]
    cfg = load_config(base, layers=[("W&B sweep", overrides), (INTERNAL, internal)])
    internal.append(f"output_dir={Path('sweeps') / name / 'runs' / config_hash(cfg)}")
    cfg = load_config(base, layers=[("W&B sweep", overrides), (INTERNAL, internal)])
    train(cfg)


def run_agent(sweep_id: str, count: int | None = None) -> int:
    """Join a W&B sweep: train the runs its controller hands out, until it has none (or ``count``)."""
    _require_online()
    import wandb

    wandb.agent(sweep_id, function=_agent_run, count=count)
    return 0
