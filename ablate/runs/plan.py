"""A sweep's ``plan.json``: the one record of what a sweep planned, its writer's and its readers' shared format.

    <sweep_dir>/plan.json   name, description, method, metric {name, goal}, base_variant, varied_keys,
                            factors [{name, levels}], design (:meth:`ablate.stats.design.Design.to_json`, and
                            ``family``: the labels of the contrasts it judges), judged [{name, goal, margin}] (the
                            metrics every row is judged on, the first the headline), base_config (the base row's
                            resolved config, from which a relaunch names what changed its runs' identities),
                            runs [{id, variant, seed, run_dir, ...}] (:class:`ablate.sweep.plan.PlannedRun`)

:mod:`ablate.sweep.plan` writes it (:meth:`PlanRecord.to_json`), :mod:`ablate.report.collect` reads it
(:meth:`PlanRecord.from_json`), and a relaunch reads it back, whole, once (:func:`read_plan`, the one function that
opens the file: a launch passes its record down to every check and queue that asks what an earlier launch planned);
it lives below both so that the writer and the readers cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError
from ablate.runs.files import read_json, write_json
from ablate.stats.design import DEFAULT_GOAL, GOALS

PLAN_FILE = "plan.json"
PLAN_KEYS = ("name", "metric", "runs")  # what a plan cannot be read without
RUN_KEYS = ("id", "variant")  # what each planned run cannot be read without
NOT_A_PLAN = "a sweep's plan: a JSON mapping with a list of runs, as ablate writes it"


def plan_path(sweep_dir: str | Path) -> Path:
    """The sweep's plan: ``<sweep_dir>/plan.json``."""
    return Path(sweep_dir) / PLAN_FILE


@dataclass(frozen=True)
class PlanRecord:
    """What ``plan.json`` holds, field for field."""

    name: str
    metric: dict[str, Any]  # {name, goal}
    runs: tuple[dict[str, Any], ...]  # each planned run's fields, in launch order
    description: str | None = None
    method: str | None = None
    base_variant: str = ""  # the variant rows are compared with
    varied_keys: tuple[str, ...] = ()
    factors: tuple[dict[str, Any], ...] = ()  # a grid's factors and their levels, {name, levels}
    design: dict[str, Any] | None = None  # how rows are compared with the base (Design.to_json)
    judged: tuple[dict[str, Any], ...] = ()  # the judged metrics (Judged.to_json), the first the headline; ()
    # in a plan written before them: the metric alone, at the design's margin
    base_config: dict[str, Any] | None = None  # the base row's resolved config (None: a plan written before it)

    def to_json(self) -> dict[str, Any]:
        """The record as plan.json holds it."""
        return {
            "name": self.name,
            "description": self.description,
            "method": self.method,
            "metric": self.metric,
            "base_variant": self.base_variant,
            "varied_keys": list(self.varied_keys),
            "factors": list(self.factors),
            "design": self.design,
            "judged": list(self.judged),
            "base_config": self.base_config,
            "runs": list(self.runs),
        }

    @classmethod
    def from_json(cls, data: Any, path: str | Path = PLAN_FILE, *, complete: bool = True) -> PlanRecord:
        """Check and read a plan.json's content. ``base_variant`` defaults to the first run's variant when the plan
        names none. ``complete=False`` (a relaunch resuming the runs): only its runs are required, a missing name or
        metric read as empty.

        Raises:
            ConfigError: a required key is missing or a value is malformed, naming the key and ``path``.
        """
        path = str(path)
        if not isinstance(data, dict) or not isinstance(data.get("runs", []), list) or \
                not all(isinstance(run, dict) for run in data.get("runs", [])):
            raise ConfigError("file", path, NOT_A_PLAN)
        if not complete:
            if "runs" not in data:
                raise ConfigError("file", path, NOT_A_PLAN)
            data = {"name": "", "metric": {"name": ""}, **data}
        missing = [k for k in PLAN_KEYS if k not in data]
        missing += [f"runs[{i}].{k}" for i, run in enumerate(data.get("runs", [])) for k in RUN_KEYS if k not in run]
        if missing:
            raise ConfigError(missing[0], None, "a value (the key is missing)", path)
        for i, run in enumerate(data["runs"]):
            seed = run.get("seed")
            if not isinstance(run["id"], str) or not isinstance(run["variant"], str) or \
                    not (seed is None or (isinstance(seed, int) and not isinstance(seed, bool))):
                raise ConfigError(f"runs[{i}]", {k: run.get(k) for k in ("id", "variant", "seed")},
                                  "a run as ablate plans it: a string id and variant, an integer seed or none", path)
        metric = data["metric"]
        if not isinstance(metric, dict) or "name" not in metric:
            raise ConfigError("metric", metric, "a mapping {name: ..., goal: minimize|maximize}", path)
        if metric.get("goal", DEFAULT_GOAL) not in GOALS:
            raise ConfigError("metric.goal", metric.get("goal"), f"one of {', '.join(GOALS)}", path)
        runs = tuple(data["runs"])
        design = data.get("design")
        if design is not None and not isinstance(design, dict):
            raise ConfigError("design", design, "a mapping written by ablate sweep", path)
        factors = data.get("factors") or []
        if not isinstance(factors, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str) and
                                                    isinstance(f.get("levels"), list) for f in factors):
            raise ConfigError("factors", factors, "a list of {name, levels} written by ablate sweep", path)
        judged = data.get("judged") or []
        if not isinstance(judged, list) or not all(isinstance(j, dict) and isinstance(j.get("name"), str)
                                                   for j in judged):
            raise ConfigError("judged", judged, "a list of {name, goal, margin} written by ablate sweep", path)
        base_config = data.get("base_config")
        if base_config is not None and not isinstance(base_config, dict):
            raise ConfigError("base_config", base_config, "a mapping written by ablate sweep", path)
        return cls(data["name"], metric, runs, data.get("description"), data.get("method"),
                   data.get("base_variant") or (runs[0]["variant"] if runs else ""),
                   tuple(data.get("varied_keys", ())), tuple(factors), design, tuple(judged), base_config)

    @property
    def goal(self) -> str:
        """Whether the metric is minimised or maximised (minimize when the plan does not say)."""
        return self.metric.get("goal", DEFAULT_GOAL)


def read_plan(sweep_dir: str | Path, *, complete: bool = True) -> PlanRecord | None:
    """``<sweep_dir>/plan.json``, read and checked (:meth:`PlanRecord.from_json`, ``complete`` as there); None when
    there is none. The one function that reads the file.

    Raises:
        ConfigError: it is not a plan as ablate writes it, naming the file.
    """
    path = plan_path(sweep_dir)
    if not path.is_file():
        return None
    return PlanRecord.from_json(read_json(path), path, complete=complete)


def read_plan_record(sweep_dir: str | Path) -> PlanRecord:
    """Read and check ``<sweep_dir>/plan.json`` (:func:`read_plan`), which must exist.

    Raises:
        FileNotFoundError: there is no plan.json.
        ConfigError: it is not a plan as ablate writes it (:meth:`PlanRecord.from_json`).
    """
    record = read_plan(sweep_dir)
    if record is None:
        raise FileNotFoundError(f"{plan_path(sweep_dir)}: no plan.json; is {sweep_dir} a sweep directory?")
    return record


def planned_runs(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """The runs of an existing plan.json, each as written (a bayes sweep's plan grows across launches); [] when there
    is none.

    Raises:
        ConfigError: it is not a mapping with a list of runs, naming the file.
    """
    record = read_plan(sweep_dir, complete=False)
    return [] if record is None else list(record.runs)


def write_plan_record(sweep_dir: str | Path, record: PlanRecord) -> None:
    """Write ``<sweep_dir>/plan.json`` (atomically)."""
    write_json(plan_path(sweep_dir), record.to_json())
