"""Reading a sweep directory: the plan, and what each of its runs has written so far (each run read by
:mod:`ablate.runs.outcome`).

    <sweep_dir>/plan.json                                  the runs, in order: id, variant, seed, varied keys
    <sweep_dir>/runs/<run_id>/result.json                  absent until the run starts
    <sweep_dir>/runs/<run_id>/logs/version_*/metrics.csv   every logged row (see ``read_metrics``)

Nothing here aggregates; :mod:`ablate.report.table` turns these runs into a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.runs.files import read_json
from ablate.runs.outcome import RunRow, outcomes, read_run
from ablate.stats.design import Design

__all__ = ["Plan", "RunRow", "outcomes", "read_plan", "read_runs"]  # RunRow, outcomes: from ablate.runs.outcome

GOALS = ("minimize", "maximize")
PLAN_KEYS = ("name", "metric", "runs")
RUN_KEYS = ("id", "variant")


@dataclass(frozen=True)
class Plan:
    """The parts of ``plan.json`` a report needs."""

    name: str
    metric: str
    goal: str
    base_variant: str
    varied_keys: tuple[str, ...]
    runs: tuple[dict[str, Any], ...]
    design: Design = Design()  # how rows are compared with the base (a fixed design when the plan names none)
    factors: tuple[dict[str, Any], ...] = ()  # the design's factors and their levels ([]: a plan without them)


def read_plan(sweep_dir: Path) -> Plan:
    """Read and check ``<sweep_dir>/plan.json``.

    Args:
        sweep_dir: a sweep directory written by the sweep runner.

    Returns:
        The plan. ``base_variant`` defaults to the first run's variant when the plan names none.

    Raises:
        FileNotFoundError: there is no plan.json.
        ConfigError: a required key is missing or the metric is malformed (the message names the key).
    """
    path = Path(sweep_dir) / "plan.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no plan.json; is {sweep_dir} a sweep directory?")
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("runs", []), list) or \
            not all(isinstance(run, dict) for run in data.get("runs", [])):
        raise ConfigError("file", str(path), "a sweep's plan: a JSON mapping with a list of runs, as ablate writes it")
    missing = [k for k in PLAN_KEYS if k not in data]
    missing += [f"runs[{i}].{k}" for i, run in enumerate(data.get("runs", [])) for k in RUN_KEYS if k not in run]
    if missing:
        raise ConfigError(missing[0], None, "a value (the key is missing)", str(path))
    for i, run in enumerate(data["runs"]):
        seed = run.get("seed")
        if not isinstance(run["id"], str) or not isinstance(run["variant"], str) or \
                not (seed is None or (isinstance(seed, int) and not isinstance(seed, bool))):
            raise ConfigError(f"runs[{i}]", {k: run.get(k) for k in ("id", "variant", "seed")},
                              "a run as ablate plans it: a string id and variant, an integer seed or none", str(path))
    metric = data["metric"]
    if not isinstance(metric, dict) or "name" not in metric:
        raise ConfigError("metric", metric, "a mapping {name: ..., goal: minimize|maximize}", str(path))
    goal = metric.get("goal", "minimize")
    if goal not in GOALS:
        raise ConfigError("metric.goal", goal, f"one of {', '.join(GOALS)}", str(path))
    runs = tuple(data["runs"])
    base = data.get("base_variant") or (runs[0]["variant"] if runs else "")
    design = data.get("design")
    if design is not None and not isinstance(design, dict):
        raise ConfigError("design", design, "a mapping written by ablate sweep", str(path))
    factors = data.get("factors") or []
    if not isinstance(factors, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str) and
                                                isinstance(f.get("levels"), list) for f in factors):
        raise ConfigError("factors", factors, "a list of {name, levels} written by ablate sweep", str(path))
    return Plan(data["name"], metric["name"], goal, base, tuple(data.get("varied_keys", ())), runs,
                Design.from_json(design) if design else Design(), tuple(factors))


def read_runs(sweep_dir: Path, plan: Plan) -> list[RunRow]:
    """Every planned run, in plan order."""
    return [read_run(sweep_dir, entry, plan.metric) for entry in plan.runs]
