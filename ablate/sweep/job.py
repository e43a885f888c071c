"""A job: what a backend starts, and the one function every backend starts it with.

A job is one run alone or the seeds of one variant as a seed array (:mod:`ablate.train.array`), trained, then
evaluated as the sweep's ``evaluate:`` asks (``ablate evaluate RUN_DIR OPTIONS`` on each run that finished). The
local pool runs :func:`run_job` on this machine, a Ray task and a Slurm job run it on their node
(:mod:`ablate.sweep.ray_backend`, :mod:`ablate.sweep.slurm_backend`): where a job runs is the backend's only choice,
so what a run records cannot depend on which one trained it.

Each run and array trains in a child process (:mod:`ablate.sweep.children`); a child that ended without saying so
in its ``result.json`` (killed, or stopped before it started) is recorded here: *interrupted* when a signal stopped
it from outside (:mod:`ablate.exits`), so a relaunch resumes it, else *failed* with the reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ablate.exits import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, interrupted
from ablate.runs.files import config_path, log_path, read_result, write_atomic, write_result
from ablate.runs.status import Status
from ablate.runs.sweep_folder import array_log as array_log_of
from ablate.sweep.children import Children, run_ablate
from ablate.sweep.plan import PlannedRun

Ended = tuple[int, str]  # a run's (exit code, error): 0 and "" when it trained (and was evaluated) as asked


@dataclass(frozen=True)
class Job:
    """``runs`` (one, or a variant's seeds that train as one array), each run's resolved config YAML (``configs``,
    its output_dir set) and the ``ablate evaluate`` options to run on each after training (None: none)."""

    runs: tuple[PlannedRun, ...]
    configs: tuple[str, ...]
    evaluate: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        """The job's name in the sweep folder: its first run's id, ``+N`` its other members (an array's log)."""
        return self.runs[0].id + (f"+{len(self.runs) - 1}" if len(self.runs) > 1 else "")

    def to_json(self) -> dict[str, Any]:
        return {"runs": [asdict(r) for r in self.runs], "configs": list(self.configs),
                "evaluate": None if self.evaluate is None else list(self.evaluate)}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Job:
        evaluate = record.get("evaluate")
        return cls(tuple(PlannedRun(**r) for r in record["runs"]), tuple(record["configs"]),
                   None if evaluate is None else tuple(evaluate))


def run_job(job: Job, sweep_dir: Path, *, env: dict[str, str], children: Children, cwd: Path | None = None,
            fresh: bool = False) -> list[Ended]:
    """Train ``job`` on this machine, then evaluate each of its runs that finished; one (exit code, error) per run.

    Args:
        job: the runs and their configs.
        sweep_dir: the sweep's folder (run folders are ``sweep_dir / run.run_dir``).
        env: the slot's environment (its GPU, its threads).
        children: the pool's running processes (a signal that stops the pool reaches them there).
        cwd: the folder relative paths in the configs are relative to (default: this process's).
        fresh: a new interpreter per process rather than a fork of the warm server (a cluster node's job).
    """
    paths = [_write_config(sweep_dir / run.run_dir, text) for run, text in zip(job.runs, job.configs)]
    if len(job.runs) == 1:
        log = log_path(sweep_dir / job.runs[0].run_dir)
        code = run_ablate(["train", str(paths[0])], log, env, cwd, children, fresh=fresh)
    else:
        log = array_log(sweep_dir, job)
        log.parent.mkdir(parents=True, exist_ok=True)
        for run in job.runs:
            with open(log_path(sweep_dir / run.run_dir), "a") as out:
                out.write(f"ablate: trained as a member of a seed array of {len(job.runs)}; its output: {log}\n")
        code = run_ablate(["train-array", *map(str, paths)], log, env, cwd, children, fresh=fresh)
    ended = []
    for run in job.runs:
        run_dir = sweep_dir / run.run_dir
        error = record_end(run_dir, code, log)
        status = (read_result(run_dir) or {}).get("status")
        mine = EXIT_FAILED if code == EXIT_OK and status == Status.FAILED else code  # failed alone in a good array
        if mine == EXIT_OK and job.evaluate is not None and status == Status.FINISHED:
            mine, error = _evaluate(run_dir, list(job.evaluate), env, cwd, children, fresh)
        ended.append((mine, error))
    return ended


def array_log(sweep_dir: Path, job: Job) -> Path:
    """Where a seed array's output goes (each member's ``train.log`` names it)."""
    return array_log_of(sweep_dir, job.runs[0].id, len(job.runs))


def _write_config(run_dir: Path, config_text: str) -> Path:
    """``<run_dir>/config.yaml`` (the folder made first), what ``ablate train`` and ``train-array`` read."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(config_path(run_dir), config_text)
    return config_path(run_dir)


def record_end(run_dir: Path, code: int, log: Path, why: str | None = None) -> str:
    """Record in ``result.json`` how a run's process ended when the run could not say so itself (killed, or gone
    before it started); returns its error (or the exit code). ``why``: the reason, when the caller knows it (a
    cluster's word on its job); else the signal or the log's last line."""
    result = read_result(run_dir) or {}
    if code not in (EXIT_OK, EXIT_LOCKED) and result.get("status") in (None, Status.RUNNING):
        why = why or f"{_why(code, log)}; see {log}"
        result.update(status=Status.INTERRUPTED if interrupted(code) else Status.FAILED, error=why)
        write_result(run_dir, result)
    return result.get("error", f"exit code {code}")


def _why(code: int, log: Path) -> str:
    """Why a run ended without recording a reason: the signal that killed it (SIGKILL: the kernel's OOM killer,
    most often), or the last line it printed."""
    import signal

    if code < 0:
        name = signal.Signals(-code).name
        return f"killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    return f"exit code {code}: {lines[-1]}" if lines else f"exit code {code}"


def _evaluate(run_dir: Path, options: list[str], env: dict[str, str], cwd: Path | None, children: Children,
              fresh: bool) -> Ended:
    """``ablate evaluate RUN_DIR OPTIONS`` after training; result.json records the options once it succeeded."""
    log = run_dir / "evaluate.log"
    code = run_ablate(["evaluate", str(run_dir), *options], log, env, cwd, children, fresh=fresh)
    if code == EXIT_OK:
        write_result(run_dir, {"evaluated": list(options)}, merge=True)
        return EXIT_OK, ""
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    return code, f"ablate evaluate failed: {lines[-1] if lines else code}; see {log}"
