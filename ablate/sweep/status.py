"""``ablate status SWEEP``: what a sweep is doing, read from its folder alone, while it runs or after.

Ray Tune's trial table, for a sweep folder: each run's state (a run whose ``result.json`` says *running* is running
only while a process holds its lock: :mod:`ablate.runs.lock`; one that lost its process is said so), its step and
last validation, where it runs (its Slurm job, when the sweep runs on Slurm); then each row's verdict, and for a row
of a sequential design still undecided, the seeds its next look waits for; and the time left, from the wall time of
the runs that ended. Nothing is written, so it is safe beside a running launcher.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.formats import format_duration
from ablate.runs.files import PROGRESS_FILE, read_json, read_result, read_run_config
from ablate.runs.lock import held
from ablate.runs.metrics import VAL_LOSS
from ablate.runs.plan import read_plan_record
from ablate.runs.status import SETTLED, Status
from ablate.runs.sweep_folder import slurm_jobs
from ablate.stats.design import Design

LOST = "lost"  # a run whose result says running but whose process is gone: a relaunch resumes it


@dataclass(frozen=True)
class RunState:
    """One planned run as the folder shows it now."""

    variant: str
    seed: int
    state: str  # a Status word, or LOST, or pending
    step: int | None  # its last validation's step
    max_steps: int | None
    value: float | None  # the headline metric at that validation
    where: str  # "slurm job N", or "" (this machine's pool)
    seconds: float | None  # wall time, once it ended


def run_states(sweep_dir: Path) -> tuple[Any, list[RunState]]:
    """The sweep's plan record and each planned run's state, in plan order."""
    record = read_plan_record(sweep_dir)
    jobs_file = slurm_jobs(sweep_dir)
    jobs = read_json(jobs_file) if jobs_file.is_file() else {}
    job_of = {run_id: info.get("id") for info in jobs.values() for run_id in info.get("runs", [])}
    metric, out = record.metric.get("name", VAL_LOSS), []
    for run in record.runs:
        run_dir = sweep_dir / run["run_dir"]
        result = read_result(run_dir) or {}
        state = result.get("status") or Status.PENDING
        if state == Status.RUNNING and not held(run_dir):
            state = LOST
        progress = read_json(run_dir / PROGRESS_FILE) if (run_dir / PROGRESS_FILE).is_file() else {}
        history = progress.get("history", {}).get(metric, [])
        cfg = read_run_config(run_dir) if (run_dir / "config.yaml").is_file() else None
        out.append(RunState(run["variant"], int(run["seed"]), str(state), progress.get("step"),
                            int(cfg.train.max_steps) if cfg is not None else None,
                            history[-1][1] if history else None,
                            f"slurm job {job_of[run['id']]}" if run["id"] in job_of else "",
                            result.get("wall_time_s") if state in SETTLED else None))
    return record, out


def status_lines(sweep_dir: Path) -> list[str]:
    """What ``ablate status`` prints (see the module docstring)."""
    from ablate.report import build_report

    record, states = run_states(sweep_dir)
    counts = {s: sum(r.state == s for r in states) for s in dict.fromkeys(r.state for r in states)}
    lines = [f"sweep {record.name}: {len(states)} runs planned: " + ", ".join(f"{n} {s}" for s, n in counts.items())]
    for r in states:
        if r.state in (Status.RUNNING, LOST):
            at = f"step {r.step or 0}/{r.max_steps}" if r.max_steps else f"step {r.step or 0}"
            value = f", {record.metric.get('name')} {r.value:.4g} there" if r.value is not None else ""
            how = " (its process is gone: a relaunch resumes it)" if r.state == LOST else ""
            lines.append(f"  {r.state:<8} {r.variant} seed {r.seed}: validated at {at}{value}"
                         f"{'; ' + r.where if r.where else ''}{how}")
    report = build_report(sweep_dir)
    design = report.design
    waiting: list[tuple[str, int]] = []
    for row in report.variants:
        c = row.comparison
        if row.is_base or c is None:
            continue
        if c.decided_at is not None or design is None or not design.sequential:
            lines.append(f"  row {row.name}: {c.verdict}" + (f", decided at {c.decided_at} seeds"
                                                               if c.decided_at is not None else ""))
            continue
        if c.look >= design.max_seeds:
            lines.append(f"  row {row.name}: {c.verdict} at {c.look} seeds, the most its design runs")
            continue
        seeds = design.seeds(c.look + 1)
        ended = {(r.variant, r.seed) for r in states if r.state in SETTLED}
        need = [(v, s) for v in (row.name, row.base_name or record.base_variant) for s in seeds if (v, s) not in ended]
        waiting += need
        lines.append(f"  row {row.name}: {c.verdict} at {c.look} seeds; its look at {c.look + 1} waits for "
                     + (", ".join(f"{v} seed {s}" for v, s in dict.fromkeys(need)) or "nothing: it comes next"))
    lines.append(_time_left(states, len(set(waiting)), design))
    return lines


def _time_left(states: list[RunState], waiting: int, design: Design | None) -> str:
    """The time the runs still to do take, at the mean wall time of those that ended, over the runs going now."""
    seconds = [r.seconds for r in states if r.seconds]
    going = sum(r.state == Status.RUNNING for r in states)
    todo = waiting if design is not None and design.sequential else sum(r.state not in SETTLED for r in states)
    if not todo:
        return "nothing left to run" if not going else f"{going} runs going, the last of their look"
    if not seconds:
        return f"{todo} runs to go; time left: once a run has ended"
    left = todo * statistics.fmean(seconds) / max(1, going)
    return (f"{todo} runs to go{' at the next looks' if design is not None and design.sequential else ''}: about "
            f"{format_duration(left)} left at {statistics.fmean(seconds):.0f} s a run over {max(1, going)} at a time")
