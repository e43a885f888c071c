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

from ablate.runs.outcome import RunRow, outcomes, read_run
from ablate.runs.plan import plan_path, read_plan_record
from ablate.stats.design import Design, Judged

__all__ = ["Plan", "RunRow", "outcomes", "read_runs", "report_plan"]  # RunRow, outcomes: from ablate.runs.outcome


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
    judged: tuple[Judged, ...] = ()  # the metrics every row is judged on, the headline (``metric``) first


def report_plan(sweep_dir: Path) -> Plan:
    """The report's view of ``<sweep_dir>/plan.json``, read and checked by :func:`ablate.runs.plan.read_plan_record`.

    Args:
        sweep_dir: a sweep directory written by the sweep runner.

    Returns:
        The plan. ``base_variant`` defaults to the first run's variant when the plan names none.

    Raises:
        FileNotFoundError: there is no plan.json.
        ConfigError: a required key is missing or the metric is malformed (the message names the key).
    """
    record = read_plan_record(sweep_dir)
    design = Design.from_json(record.design) if record.design else Design()
    source = str(plan_path(sweep_dir))
    judged = tuple(Judged.from_json(j, source) for j in record.judged) or \
        (Judged(record.metric["name"], record.goal, design.margin),)
    return Plan(record.name, record.metric["name"], record.goal, record.base_variant, record.varied_keys,
                record.runs, design, record.factors, judged)


def read_runs(sweep_dir: Path, plan: Plan) -> list[RunRow]:
    """Every planned run, in plan order."""
    return [read_run(sweep_dir, entry, plan.metric) for entry in plan.runs]
