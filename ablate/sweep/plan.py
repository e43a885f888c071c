"""The run matrix of a sweep: every run's validated config, identity, varied values and size.

A run's identity is the hash of its resolved config (``output_dir`` and ``wandb``
excluded), so relaunching a sweep finds the runs it already has, and two sweeps
that plan the same config share nothing by accident: each keeps its own folder.

    <sweep_dir>/sweep.yaml        the sweep file as launched
    <sweep_dir>/plan.json         the run matrix (read by ``ablate report``)
    <sweep_dir>/runs/<id>/        one run directory each (see ablate.runs.files)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from ablate.config import load_config
from ablate.errors import ConfigError
from ablate.model import build_model, count_parameters
from ablate.model.flops import flops_per_token
from ablate.sweep.spec import Point, Sweep, _yaml_value
from ablate.runs.files import config_hash, write_json


@dataclass
class PlannedRun:
    id: str
    variant: str
    seed: int
    varied: dict[str, Any]
    overrides: list[str]
    run_dir: str  # relative to the sweep directory
    parameters: int
    flops_per_token: float


def default_sweep_dir(sweep: Sweep) -> Path:
    return Path("sweeps") / sweep.name


def _overrides(point: Point) -> list[str]:
    out = [f"{k}={_yaml_value(v)}" for k, v in point.values.items()]
    return out + ([f"seed={point.seed}"] if point.seed is not None else [])


def run_config(sweep: Sweep, overrides: list[str], run_dir: Path | None, extra: list[str] = ()) -> DictConfig:
    """The validated config of one run: base file, base overrides, CLI extras, then the run's own values."""
    tail = [f"wandb.group={_yaml_value(sweep.name)}"] + ([f"output_dir={run_dir}"] if run_dir else [])
    source = str(sweep.path)
    layers = [(source, sweep.base_overrides), ("command line", extra), (source, [*overrides, *tail])]
    try:
        return load_config(sweep.base_config, layers=layers)
    except ConfigError as err:
        raise err.at(source) from None


def plan_sweep(sweep: Sweep, sweep_dir: Path, extra: list[str] = ()) -> list[PlannedRun]:
    """Expand and validate every run before any starts.

    Raises:
        ConfigError: the first run whose config is invalid (naming the key and the sweep file).
    """
    points = sweep.points()
    varied_keys = _varied_keys(points)
    base = run_config(sweep, [], None, extra)
    runs, seen = [], set()
    for point in points:
        changed = [k for k, v in point.values.items() if OmegaConf.select(base, k) != v]
        label = point.variant + (f", seed={point.seed}" if point.seed is not None else "")
        overrides = _overrides(point) + [f"wandb.name={_yaml_value(label)}", f"wandb.tags={_yaml_value(changed)}"]
        cfg = run_config(sweep, overrides, None, extra)
        run_id = config_hash(cfg)
        if run_id in seen:  # random sampling can draw the same point twice
            continue
        seen.add(run_id)
        with torch.device("meta"):
            n_params = count_parameters(build_model(cfg))["total"]
        varied = {k: OmegaConf.select(cfg, k) for k in varied_keys}
        runs.append(PlannedRun(id=run_id, variant=point.variant, seed=cfg.seed, varied=_plain(varied),
                               overrides=overrides, run_dir=f"runs/{run_id}", parameters=n_params,
                               flops_per_token=flops_per_token(cfg)))
    return runs


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k, v in values.items()}


def _varied_keys(points: list[Point]) -> list[str]:
    keys: list[str] = []
    for p in points:
        keys += [k for k in p.values if k not in keys]
    return [k for k in keys if len({repr(p.values.get(k)) for p in points}) > 1]


def base_variant(sweep: Sweep, runs: list[PlannedRun]) -> str:
    """The row deltas are measured from: a variant named ``base``, else the first."""
    names = [r.variant for r in runs]
    return "base" if "base" in names else (names[0] if names else "")


def write_plan(sweep: Sweep, sweep_dir: Path, runs: list[PlannedRun]) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    write_json(sweep_dir / "plan.json", {
        "name": sweep.name,
        "metric": sweep.metric,
        "base_variant": base_variant(sweep, runs),
        "varied_keys": list(runs[0].varied) if runs else [],
        "runs": [asdict(r) for r in runs],
    })
