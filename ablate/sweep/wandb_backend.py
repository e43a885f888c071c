"""Sweeps through W&B's controller (``--backend wandb``) and its agents (``ablate agent``).

W&B's controller chooses the points; ablate's agents train them. A sweep goes to W&B with its searched
parameters in W&B's own form, paired rows as one categorical parameter ``row``, and, as fixed values, the
sweep file itself (``ablate.sweep``) and the command line's overrides (``ablate.extra``). Seeds are not a
W&B parameter: every point W&B hands out is trained once per seed, as locally.

An agent turns the point back into the very runs ``ablate sweep`` would have planned (:class:`Planner`):
the same config, run directory (``sweeps/<name>/runs/<config hash>``), W&B group, name, tags, job type and
flat config. The first seed's run *is* the run W&B created for the point (it trains under the agent's run
id, so the controller sees its history, e.g. for hyperband); the other seeds are runs of their own in the
same group; when all have trained, the point's run gets the mean over seeds of the sweep's metric in its
summary (what bayes learns from). Runs are added to ``plan.json`` under a lock, so ``ablate report`` works on
the sweep directory of any machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from ablate.errors import COMMAND_LINE, ConfigError, check_name
from ablate.runs.files import write_atomic
from ablate.runs.owner import check_folder, claim, sweep_identity
from ablate.runs.plan import plan_path
from ablate.runs.sweep_folder import default_sweep_dir, sweep_file as sweep_file_of
from ablate.runs.status import Status
from ablate.stats.factorial import LADDER, ROW
from ablate.sweep.read import load_sweep
from ablate.sweep.spec import Sweep

SWEEP = "ablate.sweep"  # the sweep file's text
EXTRA = "ablate.extra"  # the command line's overrides, as a JSON list
AGENT_ENV = ("WANDB_RUN_ID", "WANDB_SWEEP_ID", "WANDB_SWEEP_PARAM_PATH")  # what makes a wandb.init the agent's run


def to_wandb(sweep: Sweep, extra: list[str] = ()) -> dict[str, Any]:
    """The W&B sweep configuration of an ablate sweep: W&B's own keys, plain parameters only."""
    params: dict[str, Any] = {k: p.wandb() for k, p in sweep.searched.items()}
    if sweep.rows:
        params[ROW] = {"values": [r["name"] for r in sweep.rows]}
    if sweep.ladder:  # a grid's sizes: W&B's grid crosses them with the rows like any other parameter
        params[LADDER] = {"values": [s["name"] for s in sweep.ladder]}
    params[SWEEP] = {"value": sweep.path.read_text()}
    params[EXTRA] = {"value": json.dumps(list(extra))}
    out: dict[str, Any] = {"name": sweep.name, "method": sweep.method, "metric": dict(sweep.metric),
                           "parameters": params}
    if sweep.description:
        out["description"] = sweep.description
    if sweep.run_cap:
        out["run_cap"] = sweep.n_samples()  # W&B counts points; each point trains once per seed
    if "early_terminate" in sweep.raw:
        out["early_terminate"] = dict(sweep.raw["early_terminate"])
    return out


def point_of(params: dict[str, Any], sweep: Sweep) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row and the searched values of a point W&B handed out (its run config's sweep parameters).

    Raises:
        ConfigError: a row or a parameter the sweep does not have.
    """
    rows = {r["name"]: r for r in sweep.rows} or {"": {"name": ""}}
    name = params.get(ROW, next(iter(rows)))
    if name not in rows:
        raise ConfigError(ROW, name, f"one of {', '.join(rows)}", "W&B sweep")
    missing = [k for k in sweep.searched if k not in params]
    if missing:
        raise ConfigError(missing[0], None, "a value from the W&B sweep's run config", "W&B sweep")
    return rows[name], {k: params[k] for k in sweep.searched}


def step_of(params: dict[str, Any], sweep: Sweep) -> dict[str, Any] | None:
    """The ladder step of a point W&B handed out; None without a ladder.

    Raises:
        ConfigError: a step the sweep does not have.
    """
    if not sweep.ladder:
        return None
    steps = {s["name"]: s for s in sweep.ladder}
    if params.get(LADDER) not in steps:
        raise ConfigError(LADDER, params.get(LADDER), f"one of {', '.join(steps)}", "W&B sweep")
    return steps[params[LADDER]]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def add_to_plan(sweep: Sweep, sweep_dir: Path, runs: list) -> None:
    """Add runs to ``plan.json`` (created if need be), under a lock: agents on one machine share the file."""
    from ablate.sweep.plan import read_planned, write_plan

    with _locked(plan_path(sweep_dir)):
        known = read_planned(sweep_dir)
        ids = {r.id for r in known}
        write_plan(sweep, sweep_dir, known + [r for r in runs if r.id not in ids])


@contextmanager
def _not_the_agents_run() -> Iterator[None]:
    """A run of its own: without the agent's run id, sweep id and parameters in the environment. wandb reads
    them once into its process-wide settings, so it is torn down on the way in and out."""
    import wandb

    saved = {k: os.environ.pop(k) for k in AGENT_ENV if k in os.environ}
    wandb.teardown()
    try:
        yield
    finally:
        os.environ.update(saved)
        wandb.teardown()


def agent_trial(params: dict[str, Any]) -> list[Path]:
    """Train the point a W&B agent was handed, once per seed (the first seed under the agent's run id), each seed a
    job as the local pool starts it (:func:`ablate.sweep.job.run_job`: ``ablate train`` in a child process, then the
    sweep's ``evaluate:``), so that what an agent's run records is what the local pool's records.

    W&B's controller stops a point (its ``early_terminate``) by raising in the agent's thread: the run is then asked
    to stop as the local pool's hyperband asks it (its STOP file, with W&B's word as the reason), its step is saved
    and it is recorded *stopped*; the point's other seeds are not trained.

    Args:
        params: the point's run config (``{name: value}``), as the agent wrote it for ``wandb.init``.

    Returns:
        The run directories.
    """
    from omegaconf import OmegaConf

    from ablate.runs.files import read_result
    from ablate.runs.wandb import record_scores
    from ablate.sweep.children import Children
    from ablate.sweep.job import Job, run_job
    from ablate.sweep.plan import Planner, run_config

    sweep_dir, extra = sweep_folder(params), _extra(params)
    sweep_file = sweep_file_of(sweep_dir)
    write_atomic(sweep_file, params[SWEEP])
    sweep = load_sweep(sweep_file)
    row, sampled = point_of(params, sweep)
    step = step_of(params, sweep)
    runs = Planner(sweep, extra).plan([sweep.point(row, sampled, seed, step) for seed in sweep.seeds])
    add_to_plan(sweep, sweep_dir, runs)
    evaluate = sweep.evaluate_options()
    configs = [run_config(sweep, run.overrides, sweep_dir / run.run_dir, extra, [*run.labels, "logger=wandb"])
               for run in runs]
    dirs, values = [], []
    for i, (run, cfg) in enumerate(zip(runs, configs)):
        run_dir = sweep_dir / run.run_dir
        job = Job((run,), (OmegaConf.to_yaml(cfg),), None if evaluate is None else tuple(evaluate))
        children = Children()
        with _not_the_agents_run() if i else _unchanged():  # the agent's environment: its GPU, its run id
            stopped = _answering_w_and_b(lambda: run_job(job, sweep_dir, env={}, children=children, fresh=True),
                                         run_dir)
        result = read_result(run_dir) or {}
        value = (result.get("final") or {}).get(sweep.metric["name"])
        if result.get("status") == Status.FINISHED and isinstance(value, (int, float)):
            values.append(float(value))
        dirs.append(run_dir)
        if stopped:
            break  # W&B's controller stopped the point: its other seeds are not wanted
    if len(runs) > 1 and values:  # the point's score: the mean over the seeds that finished
        record_scores(configs[0], sweep_dir / runs[0].run_dir,
                      {sweep.metric["name"]: statistics.fmean(values), "seeds_finished": len(values)})
    return dirs


STOPPED_BY_W_AND_B = "stopped by W&B's sweep controller (early_terminate)"
ANSWER_EVERY = 0.5  # seconds: how soon the agent's thread takes W&B's stop (it cannot while it blocks in C)


def _answering_w_and_b(train: Callable[[], Any], run_dir: Path) -> bool:
    """Run ``train`` (a job) in a thread of its own while this one, the agent's, waits for it in Python, where W&B's
    agent can raise its stop (``PyThreadState_SetAsyncExc``: an ``Exception`` in the thread running the point). The
    stop becomes the run's STOP request; the job then ends as a stopped run ends, recorded by its own thread, which the
    raise never reaches. Returns whether W&B stopped it; what ``train`` raised is raised here."""
    from ablate.train.life import StopFile

    failed: list[BaseException] = []
    done = threading.Event()  # not Thread.join: a raise inside join marks a live thread stopped (CPython's bpo-45274)

    def job() -> None:
        try:
            train()
        except BaseException as exc:  # noqa: BLE001  (raised again in the agent's thread)
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=job, name="ablate-point", daemon=True).start()
    stopped = False
    while not done.is_set():
        try:
            done.wait(ANSWER_EVERY)
        except Exception:  # W&B's agent stopping the point (it raises the class Exception itself)
            stopped = True
            StopFile(run_dir).request(STOPPED_BY_W_AND_B)
    if failed:
        raise failed[0]
    return stopped


def sweep_folder(params: dict[str, Any], *, write: bool = True) -> Path:
    """The folder of the sweep a point belongs to, ``sweeps/<name>``, checked as the local pool checks its own
    (:mod:`ablate.runs.owner`: new, or this sweep's, by its name and what its overrides set) and, when ``write``,
    claimed: created with its marker.

    Raises:
        ConfigError: the folder is not one this sweep may write; nothing is written then.
    """
    name, extra = _name(params), _extra(params)
    check = claim if write else check_folder
    path = default_sweep_dir(name)
    check(path, "sweep", sweep_identity(name, extra), key="name", source="W&B sweep")
    return path


@contextmanager
def _unchanged() -> Iterator[None]:
    yield


def _name(params: dict[str, Any]) -> str:
    """The sweep's name, as its file (the point's :data:`SWEEP`) says: the folder ``sweeps/<name>`` its runs go in.

    Raises:
        ConfigError: no sweep file, or a name that is a path.
    """
    from ablate.yamlio import load_yaml

    text = params.get(SWEEP)
    if not isinstance(text, str):
        raise ConfigError(SWEEP, text, "the sweep file, as `ablate sweep --backend wandb` registers it", "W&B sweep")
    raw = load_yaml(text) or {}
    return check_name(str(raw.get("name") or "wandb") if isinstance(raw, dict) else "", "name", "W&B sweep")


def _extra(params: dict[str, Any]) -> list[str]:
    """The command line's overrides the sweep was registered with (the point's :data:`EXTRA`).

    Raises:
        ConfigError: not a JSON list of ``key=value`` strings.
    """
    try:
        extra = json.loads(params.get(EXTRA, "[]"))
    except (TypeError, ValueError):
        extra = None
    if not isinstance(extra, list) or not all(isinstance(o, str) for o in extra):
        raise ConfigError(EXTRA, params.get(EXTRA), "a JSON list of key=value overrides, as `ablate sweep --backend "
                          "wandb` registers it", "W&B sweep")
    return extra


def _agent_function() -> None:
    """What ``wandb.agent`` calls for each point: its parameters are in the file the agent wrote."""
    from wandb.sdk.lib import config_util

    path = os.environ.get("WANDB_SWEEP_PARAM_PATH")
    if not path:
        raise ConfigError("WANDB_SWEEP_PARAM_PATH", None, "the agent's parameter file (run under wandb.agent)",
                          "environment")
    params = {k: v.get("value") if isinstance(v, dict) else v
              for k, v in config_util.dict_from_config_file(path).items()}
    agent_trial(params)


@contextmanager
def _server(what: str, value: str) -> Iterator[None]:
    """W&B's refusals (a key the server rejects, a server that cannot be reached, a sweep it does not know) as one
    line naming the option."""
    import wandb

    try:
        yield
    except wandb.errors.Error as exc:
        raise ConfigError(what, value, f"a W&B server that accepts it (it said: {' '.join(str(exc).split())[:300]})",
                          COMMAND_LINE) from None


def _require_key(what: str, value: str) -> None:
    from ablate.runs.wandb import has_api_key, resolve_mode

    if resolve_mode("auto") != "online" or not has_api_key():
        raise ConfigError(what, value, "a configured W&B API key (`wandb login`, or WANDB_API_KEY): W&B's sweep "
                          "controller lives on its server", COMMAND_LINE)


def start_wandb_sweep(sweep: Sweep, *, extra: list[str], dry_run: bool, check: bool = True) -> int:
    """Validate the runs that can be listed, register the sweep with W&B, print entity/project/id, and start
    one agent per local GPU (one on a machine without)."""
    from ablate.sweep.plan import Planner

    config = to_wandb(sweep, extra)
    if check:  # every run a grid lists; for random and bayes, each row with a random draw of the parameters
        planner = Planner(sweep, extra, check=not dry_run)
        planner.plan(sweep.points() if sweep.search.factorial else
                     [sweep.point(row, {k: p.ppf(0.5) for k, p in sweep.searched.items()}, seed)
                      for row in (sweep.rows or [{"name": ""}]) for seed in sweep.seeds[:1]])
    if dry_run:
        print(json.dumps({k: v for k, v in config.items()}, indent=2))
        return 0
    _require_key("--backend", "wandb")
    import torch
    import wandb

    project = sweep.project or os.environ.get("WANDB_PROJECT") or "ablate"
    with _server("--backend", "wandb"):
        sweep_id = wandb.sweep(config, project=project, entity=sweep.entity)
        entity = sweep.entity or wandb.Api().default_entity
    path = f"{entity}/{project}/{sweep_id}"
    print(f"W&B sweep {path}: join from any machine with `ablate agent {path}`")
    gpus = [str(i) for i in range(torch.cuda.device_count())] or [None]
    agents = [subprocess.Popen([sys.executable, "-m", "ablate.cli", "agent", path],
                               env={**os.environ, **({"CUDA_VISIBLE_DEVICES": g} if g else {})}) for g in gpus]
    return max(a.wait() for a in agents)


def run_agent(sweep_id: str, count: int | None = None) -> int:
    """Join a W&B sweep (``entity/project/id``): train the points its controller hands out, until it has none
    (or ``count``)."""
    if sweep_id.count("/") != 2 or not all(sweep_id.split("/")):
        raise ConfigError("SWEEP_ID", sweep_id, "entity/project/id, as `ablate sweep --backend wandb` prints it",
                          COMMAND_LINE)
    _require_key("SWEEP_ID", sweep_id)
    import wandb

    entity, project, sid = sweep_id.split("/")
    with _server("SWEEP_ID", sweep_id):
        registered = wandb.Api().sweep(sweep_id).config or {}
    point = {k: v.get("value") for k, v in (registered.get("parameters") or {}).items() if isinstance(v, dict)}
    if SWEEP in point:  # a sweep ablate registered: this machine's folder of it is checked before any point trains
        sweep_folder(point, write=False)
    with _server("SWEEP_ID", sweep_id):
        wandb.agent(sid, function=_agent_function, entity=entity, project=project, count=count)
    return 0

