"""``ablate sweep``: plan every run, then (unless a dry run) run the pending ones through the queue the sweep's
method picks."""

from __future__ import annotations

import itertools
import shutil
import sys
import tempfile
import time
from dataclasses import replace
import zipfile
from pathlib import Path
from typing import Any, Callable

from omegaconf import OmegaConf

from ablate.errors import COMMAND_LINE, ConfigError
from ablate.runs.files import ARRAY_FILE, LAST_CHECKPOINT, checkpoints_dir, read_json, read_result
from ablate.runs.owner import check_folder, claim, sweep_identity
from ablate.runs.plan import PlanRecord
from ablate.runs.status import SETTLED
from ablate.runs.sweep_folder import arrays_dir, projection_path, sweep_file
from ablate.sweep.memory import training_bytes
from ablate.sweep.plan import (Planner, PlannedRun, default_sweep_dir, factor_record, factorial_of, planned_of,
                               read_earlier, run_config, write_plan)
from ablate.sweep.progress import start_note
from ablate.runs.projection import Projection, write_projection
from ablate.sweep.projection import probing_on, projection_lines
from ablate.sweep.relaunch import check_relaunch
from ablate.sweep.queue import BayesQueue, RunQueue, StreamQueue
from ablate.sweep.arrays import Fusing, arrays_of, fusing, processes_per_gpu, read_groups, seeds_note
from ablate.sweep import slots as machine
from ablate.sweep.runner import Backend, Outcome, execute, pending
from ablate.sweep.spec import Sweep


DRY_RUN_POINTS = 10  # the points an open-ended sweep's dry run shows


def _claim(sweep: Sweep, sweep_dir: Path, extra: list[str], *, write: bool) -> None:
    """Check the sweep directory is new or this sweep's (:mod:`ablate.runs.owner`: its name and the overrides it was
    launched with set, in any order), and, when ``write``, create it, marked.

    Raises:
        ConfigError: naming the folder.
    """
    identity = sweep_identity(sweep.name, extra)
    if not write:
        return check_folder(sweep_dir, "sweep", identity, key="--out")
    claim(sweep_dir, "sweep", identity, key="--out")


DESIGN_KEYS = {"alpha": "decide.alpha", "margin": "decide.margin", "max_seeds": "decide.max_seeds (--max-seeds)",
               "first": "the first look's seeds"}  # plan.json's design -> what a user changes to change it


def check_design(sweep: Sweep, sweep_dir: Path, earlier: PlanRecord | None) -> None:
    """A relaunch keeps the design its sweep was first launched with (the method, the margin, the error, the seeds):
    an interval's level and a sequential design's error spending hold only for the design fixed before any run.
    ``earlier``: the plan the sweep folder holds (:func:`ablate.sweep.plan.read_earlier`; None for a new sweep).

    Raises:
        ConfigError: the sweep folder's plan.json records another design, naming each change.
    """
    if earlier is None:
        return
    was, now = earlier.design or {}, sweep.design(1).to_json()
    changes = [f"{name} {was.get(key)!r} -> {now.get(key)!r}" for key, name in DESIGN_KEYS.items()
               if key in was and was.get(key) != now.get(key)]
    judged = [j.to_json() for j in sweep.judged]
    if earlier.judged and list(earlier.judged) != judged:
        changes.append(f"decide.metrics {list(earlier.judged)!r} -> {judged!r}")
    if earlier.method not in (None, sweep.method):
        changes.insert(0, f"method {earlier.method!r} -> {sweep.method!r}")
    if changes:
        raise ConfigError("design", "; ".join(changes), f"the design {sweep_dir} was first launched with: a "
                          "relaunch keeps it (--change-design replays every look under the new one; --out a new "
                          "folder starts a new sweep)", str(sweep.path))


def probe(folder: Path) -> None:
    """Write and remove a temporary file in ``folder``.

    Raises:
        OSError: it cannot be written (a read-only filesystem, no space, no permission).
    """
    with tempfile.TemporaryFile(dir=folder):
        pass


def check_writable(sweep_dir: Path, runs: list[PlannedRun], retry_failed: bool, earlier: list[PlannedRun]) -> None:
    """The folders a launch writes in (the sweep's, each unsettled run's and its checkpoints', the arrays') take a
    file, before anything is written: a relaunch on a read-only copy is refused whole, nothing half-written.
    ``earlier``: the runs an earlier launch planned.

    Raises:
        ConfigError: naming the first folder that does not, and why.
    """
    if not sweep_dir.is_dir():
        return
    todo, _ = pending([*runs, *(r for r in earlier if r.id not in {p.id for p in runs})], sweep_dir, retry_failed)
    folders = [sweep_dir, *arrays_dir(sweep_dir).glob("*/")]
    for run in todo:
        folders += [sweep_dir / run.run_dir, checkpoints_dir(sweep_dir / run.run_dir)]
    for folder in folders:
        if folder.is_dir():
            try:
                probe(folder)
            except OSError as exc:
                raise ConfigError("folder", str(folder), f"a folder this launch can write to ({exc.strerror}): "
                                  "relaunch where the sweep's folder is writable", COMMAND_LINE) from None


def check_array_checkpoints(sweep_dir: Path) -> None:
    """Every seed array a relaunch resumes (one with a member not yet ended) has a whole checkpoint, or none.

    Raises:
        ConfigError: one is cut short or not a checkpoint, naming it and what to do.
    """
    for last in sorted(sweep_dir.glob(f"arrays/*/{LAST_CHECKPOINT}")):
        record = last.parent / ARRAY_FILE
        members = (read_json(record) or {}).get("members", []) if record.is_file() else []
        ended = all((read_result(Path(m)) or {}).get("status") in SETTLED for m in members)
        if members and not ended and not zipfile.is_zipfile(last):  # torch.save writes a zip: a cut one has no index
            raise ConfigError("checkpoint", str(last), "a seed array's checkpoint to resume from (this one is "
                              "truncated or not a checkpoint): delete it to train its array from its first step")


Runs = list[PlannedRun]
QueueFor = Callable[[Runs, Callable[[Runs], None], Callable[[Runs], Runs]], RunQueue]
# (the plan's runs to do, how to save the plan, which of the runs a look adds are to do) -> the queue


def plan_queue(sweep: Sweep, sweep_dir: Path, planner: Planner, *, dry_run: bool,
               earlier: list[PlannedRun]) -> tuple[list[PlannedRun], QueueFor]:
    """The runs planned now and how to build the queue that hands out the rest, as the sweep's method
    (:mod:`ablate.sweep.methods`) fills it; ``earlier``: the runs an earlier launch planned ([] for a new sweep).

    A method that proposes points (bayes): its first point (a dry run) or the points an earlier launch planned;
    open-ended (random without run_cap): the draws an earlier launch made, drawn again (the stream is the sampler
    seed's; a dry run shows ``DRY_RUN_POINTS``); otherwise the whole plan, run as a sequential design when
    ``decide.max_seeds`` is set.
    """
    if sweep.search.proposes:
        from ablate.sweep.bayes import BayesSearch

        if dry_run:
            search = BayesSearch(sweep)
            u = search.ask()[1]  # one point, once per seed
            runs = planner.plan([search.point(u, seed) for seed in sweep.seeds])
        else:
            runs = list(earlier)

        def bayes(todo, save, again):
            todo_ids = {r.id for r in todo}
            return BayesQueue(sweep, sweep_dir, planner, runs, save, lambda run: run.id not in todo_ids)
        return runs, bayes
    if sweep.open_ended:
        stream = planner.runs(sweep.stream())
        runs = list(itertools.islice(stream, DRY_RUN_POINTS * len(sweep.seeds) if dry_run else
                                     len(earlier)))
        return runs, lambda todo, save, again: StreamQueue(sweep, sweep_dir, runs, todo, stream, save)
    runs = planner.plan(sweep.points())
    if sweep.decide.max_seeds:
        def sequential(todo, save, again):
            from ablate.sweep.sequential import SequentialQueue  # scipy: only when a sweep runs looks

            family = factorial_of(runs, factor_record(sweep)).family()
            return SequentialQueue(sweep, sweep_dir, planner, runs, todo, sweep.design(len(family)), save, again,
                                   earlier=earlier)
        return runs, sequential
    return runs, lambda todo, save, again: RunQueue(sweep, sweep_dir, runs, todo)


def open_queue(sweep: Sweep, sweep_dir: Path, runs: Runs, queue_for: QueueFor, *,
               retry_failed: bool) -> tuple[RunQueue, Outcome]:
    """The queue a launch hands out its runs from, as ``queue_for`` (:func:`plan_queue`) builds it over the runs still
    to do, and the outcome of those settled before; plan.json is written with every run the queue plans now.

    The queue saves the plan when a look adds runs, and of the runs a look adds it is given those still to do (a
    relaunch replays its looks: a seed an earlier launch ran is not run again)."""
    evaluate = sweep.evaluate_options()
    todo, settled = pending(runs, sweep_dir, retry_failed, evaluate)
    queue = queue_for(todo, lambda all_runs: write_plan(sweep, sweep_dir, all_runs),
                      lambda added: pending(added, sweep_dir, retry_failed, evaluate)[0])
    write_plan(sweep, sweep_dir, queue.runs)
    return queue, settled


def local_pool(planner: Planner, runs: list[PlannedRun], *, workers: int, runs_per_gpu: str | int,
               fuse: str | int) -> tuple[list[dict[str, str]], Fusing]:
    """This machine's pool for ``runs``: one environment per slot (:func:`ablate.sweep.slots.slots`) and which seeds
    fuse (:func:`ablate.sweep.arrays.fusing`), as the launch and its dry run see them."""
    biggest = max((r.parameters for r in runs), default=0)
    need = training_bytes(planner.base, biggest) if runs else None
    gpus = machine.visible_gpus()  # looked up at the call: what the pool sees now (and what a test fakes)
    per_gpu = processes_per_gpu(runs_per_gpu, fuse, gpus)
    where = machine.slots(workers=workers, runs_per_gpu=per_gpu, gpus=gpus,
                          run_bytes=need if per_gpu == machine.AUTO else None)
    return where, fusing(fuse, gpus=gpus, slots_per_gpu=max(1, len(where) // max(1, len(gpus))), run_bytes=need)


def dry_run_notes(sweep: Sweep, sweep_dir: Path, planner: Planner, runs: list[PlannedRun], *, extra: list[str],
                  workers: int, runs_per_gpu: str | int, fuse: str | int, retry_failed: bool,
                  cluster: Any, earlier: list[PlannedRun], probe: bool = False) -> list[str]:
    """What the launch would do beyond the plan: how many runs ended in earlier launches (``earlier``: the runs they
    planned), how each variant's seeds train (the arrays it would record, or resume:
    :func:`ablate.sweep.arrays.arrays_of`), and, with ``probe`` on this machine's pool, the projected wall time
    (:func:`sweep_projection`)."""
    known = {r.id for r in runs}
    every = [*runs, *(r for r in earlier if r.id not in known)]
    todo, _ = pending(every, sweep_dir, retry_failed, sweep.evaluate_options())
    lines = []
    if len(todo) < len(every):
        lines.append(f"{len(every) - len(todo)} of {len(every)} runs planned so far ended in earlier launches; "
                     f"{len(todo)} to train" + (" now" if sweep.decide.max_seeds else ""))
    if cluster is not None:
        where, rule = cluster.slots(len(todo)), cluster_fusing(fuse)
        if rule is None:
            return [*lines, f"how seeds train: alone, each run {cluster.job_name} (--fuse on or N fuses them)"]
    else:
        where, rule = local_pool(planner, every, workers=workers, runs_per_gpu=runs_per_gpu, fuse=fuse)

    config_of = configs_of(sweep, sweep_dir, extra)
    groups = arrays_of(todo, every, config_of, rule, len(where), sweep_dir)
    lines += seeds_note(groups, rule, config_of, later_looks=bool(sweep.decide.max_seeds))
    if probe and cluster is None and groups:
        lines += ["", *projected(lambda: sweep_projection(sweep, groups, config_of, where))]
    return lines


def projected(make: Callable[[], Projection], record: Callable[[Projection], None] = lambda p: None) -> list[str]:
    """The projection's lines (:func:`ablate.sweep.projection.projection_lines`) of the projection ``make`` probes,
    ``record``-ed; a probe that fails (a shape that does not build or fit here) is one line saying so, and the sweep
    goes on: a projection is advice, never a reason to refuse a launch."""
    try:
        projection = make()
    except Exception as exc:  # noqa: BLE001  (whatever the probe's build or step raised: it is named)
        first = (str(exc).strip().splitlines() or [""])[0]
        return [f"no projected wall time: the probe failed ({type(exc).__name__}: {first}); --no-probe skips it"]
    record(projection)
    return projection_lines(projection)


def sweep_projection(sweep: Sweep, groups: list[list[PlannedRun]], config_of: Callable[[PlannedRun], Any],
                     where: list[dict[str, str]]) -> Projection:
    """The wall time ``groups`` (the jobs the pool hands out: :func:`ablate.sweep.arrays.arrays_of`) take on the
    pool's slots ``where``, and a sequential design's later looks (:mod:`ablate.sweep.projection`)."""
    from ablate.sweep.probe import probe_sweep  # torch and the data: only when a launch probes

    max_seeds, first = sweep.decide.max_seeds, len(sweep.design(1).first)
    evaluate = None if sweep.evaluate is None else sweep.evaluate if isinstance(sweep.evaluate, dict) else {}
    return probe_sweep(groups, config_of, evaluate, where[0], len(where),
                       later_looks=max(0, max_seeds - first) if max_seeds else 0)


def configs_of(sweep: Sweep, sweep_dir: Path, extra: list[str]) -> Callable[[PlannedRun], Any]:
    """A planned run's config in ``sweep_dir``, the command line's ``extra`` overrides included: what its process
    trains, what the arrays are grouped and the probe measures by."""
    return lambda run: run_config(sweep, run.overrides, sweep_dir / run.run_dir, extra, run.labels)


def cluster_fusing(fuse: str | int) -> Fusing | None:
    """Which seeds a cluster backend's jobs fuse: with ``--fuse on`` or ``N``, as asked; otherwise (``auto``, ``off``)
    every run alone, since the launcher cannot see the nodes' GPUs to size an array."""
    return None if str(fuse) in ("auto", "off") else fusing(fuse, gpus=[])


def record_projection(sweep: Sweep, sweep_dir: Path, runs: Runs, todo: Runs, where: list[dict[str, str]],
                      rule: Fusing, extra: list[str]) -> None:
    """Probe, print the projection and record it in the sweep folder (:func:`ablate.sweep.projection.
    write_projection`), before the first run starts."""
    config_of = configs_of(sweep, sweep_dir, extra)
    lines = projected(lambda: sweep_projection(sweep, arrays_of(todo, runs, config_of, rule, len(where), sweep_dir),
                                               config_of, where),
                      # the runs start now: the actual's elapsed is counted from here
                      lambda projection: write_projection(sweep_dir, replace(projection, launched_at=time.time())))
    print("\n".join(lines), file=sys.stderr)


def launch(sweep: Sweep, *, extra: list[str], sweep_dir: Path | None, workers: int, dry_run: bool,
           retry_failed: bool, progress: bool = True, runs_per_gpu: str | int = machine.RUNS_PER_GPU,
           cluster: Any = None, fuse: str | int = "auto", notes: list[str] | None = None,
           change_design: bool = False, probe: bool | None = None) -> tuple[Path, list[PlannedRun], Outcome | None]:
    """Plan every run (validating each config), then run the pending ones unless ``dry_run``.

    A bayes sweep plans its points as it goes: its dry run plans (and shows) the first point only.
    ``cluster``: where jobs run when not on this machine (:class:`ablate.sweep.ray_backend.RayRunner`,
    :class:`ablate.sweep.slurm_backend.SlurmBackend`); default this machine's pool of ``workers``
    (``runs_per_gpu`` on each GPU); ``fuse``: which seeds train as seed arrays (:func:`ablate.sweep.arrays.fusing`;
    on a cluster: :func:`cluster_fusing`); ``notes``: a dry run adds what it would do beyond the plan
    (:func:`dry_run_notes`) to it; ``change_design``: a relaunch may change the design
    (:func:`check_design`, :func:`ablate.sweep.relaunch.check_relaunch`); ``probe``: project the wall time on this
    machine's pool (the dry run prints it, the first launch records it: :mod:`ablate.sweep.projection`; default
    unless ``ABLATE_PROBE=off``).
    """
    probe = probing_on() if probe is None else probe
    sweep_dir = sweep_dir or default_sweep_dir(sweep)
    if cluster is not None:  # its runs train on other machines, which share the filesystem but not our cwd
        sweep_dir = sweep_dir.resolve()
    _claim(sweep, sweep_dir, extra, write=False)  # before the plan: a plan can read the folder (a bayes sweep's)
    record = read_earlier(sweep_dir)  # the launch's one read of plan.json, before anything writes it
    earlier = planned_of(record, sweep_dir)
    if not change_design:
        check_design(sweep, sweep_dir, record)
    planner = Planner(sweep, extra, check=not dry_run)
    runs, queue_for = plan_queue(sweep, sweep_dir, planner, dry_run=dry_run, earlier=earlier)
    if not change_design:
        check_relaunch(sweep, sweep_dir, runs, record)  # the family and the ended runs' identities
    if dry_run:
        if notes is not None:
            notes += dry_run_notes(sweep, sweep_dir, planner, runs, extra=extra, workers=workers,
                                   runs_per_gpu=runs_per_gpu, fuse=fuse, retry_failed=retry_failed, cluster=cluster,
                                   earlier=earlier, probe=probe)
        return sweep_dir, runs, None
    check_writable(sweep_dir, runs, retry_failed, earlier)
    read_groups(sweep_dir)  # a damaged record of the arrays is refused before anything is written
    check_array_checkpoints(sweep_dir)
    _claim(sweep, sweep_dir, extra, write=True)
    if sweep.path.resolve() != sweep_file(sweep_dir).resolve():
        shutil.copyfile(sweep.path, sweep_file(sweep_dir))
    evaluate = sweep.evaluate_options()
    queue, settled = open_queue(sweep, sweep_dir, runs, queue_for, retry_failed=retry_failed)
    todo_ids = {r.id for r in queue.todo}  # a sequential design may have added the seeds earlier looks asked for
    runs = queue.runs
    if queue.planned_ahead:  # the others plan as they go: their bar counts
        print(start_note(sweep.name, runs, list(queue.todo), sweep_dir,
                         sweep.decide.most_runs(len({r.variant for r in runs}))), file=sys.stderr)
    ended = [r for r in runs if r.id not in todo_ids]  # ended in an earlier launch
    backend: Backend | None = None
    if cluster is not None:
        where, rule = cluster.slots(None if queue.total is None else queue.total - len(ended)), cluster_fusing(fuse)
        backend = cluster.open(sweep_dir)
    else:
        where, rule = local_pool(planner, runs, workers=workers, runs_per_gpu=runs_per_gpu, fuse=fuse)
        if probe and queue.todo and not projection_path(sweep_dir).is_file():
            record_projection(sweep, sweep_dir, runs, list(queue.todo), where, rule, extra)
    config_of = configs_of(sweep, sweep_dir, extra)
    outcome = execute(queue, lambda r: OmegaConf.to_yaml(config_of(r)),
                      sweep_dir, slots=where, backend=backend, progress=progress, evaluate=evaluate,
                      hyperband=sweep.early_terminate, metric=sweep.metric["name"], goal=sweep.metric["goal"],
                      settled=ended, fusing=rule)
    outcome.failed = {**settled.failed, **outcome.failed}
    outcome.skipped += settled.skipped
    return sweep_dir, runs, outcome
