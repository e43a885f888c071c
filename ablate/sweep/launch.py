"""``ablate sweep``: plan every run, then (unless a dry run) run the pending ones through the queue the sweep's
method picks."""

from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from omegaconf import OmegaConf

from ablate.runs.owner import check_folder, claim, sweep_identity
from ablate.sweep.memory import training_bytes
from ablate.sweep.plan import (Planner, PlannedRun, default_sweep_dir, factor_record, factorial_of, read_planned,
                               run_config, write_plan)
from ablate.sweep.progress import start_note
from ablate.sweep.queue import BayesQueue, RunQueue, StreamQueue
from ablate.sweep.arrays import fusing, processes_per_gpu
from ablate.sweep import runner as pool
from ablate.sweep.runner import Outcome, execute, pending, slots
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


Runs = list[PlannedRun]
QueueFor = Callable[[Runs, Callable[[Runs], None], Callable[[Runs], Runs]], RunQueue]
# (the plan's runs to do, how to save the plan, which of the runs a look adds are to do) -> the queue


def plan_queue(sweep: Sweep, sweep_dir: Path, planner: Planner, *, dry_run: bool) -> tuple[list[PlannedRun], QueueFor]:
    """The one place ``launch`` looks at the sweep's method: the runs planned now and how to build the queue that
    hands out the rest.

    bayes: its first point (a dry run) or the points an earlier launch planned; open-ended random: the draws an
    earlier launch made, drawn again (the stream is the sampler seed's; a dry run shows ``DRY_RUN_POINTS``);
    otherwise the whole plan, run as a sequential design when ``decide.max_seeds`` is set.
    """
    if sweep.method == "bayes":
        from ablate.sweep.bayes import BayesSearch

        if dry_run:
            search = BayesSearch(sweep)
            u = search.ask()[1]  # one point, once per seed
            runs = planner.plan([search.point(u, seed) for seed in sweep.seeds])
        else:
            runs = read_planned(sweep_dir)

        def bayes(todo, save, again):
            todo_ids = {r.id for r in todo}
            return BayesQueue(sweep, sweep_dir, planner, runs, save, lambda run: run.id not in todo_ids)
        return runs, bayes
    if sweep.open_ended:
        stream = planner.runs(sweep.stream())
        runs = list(itertools.islice(stream, DRY_RUN_POINTS * len(sweep.seeds) if dry_run else
                                     len(read_planned(sweep_dir))))
        return runs, lambda todo, save, again: StreamQueue(sweep, sweep_dir, runs, todo, stream, save)
    runs = planner.plan(sweep.points())
    if sweep.decide.max_seeds:
        def sequential(todo, save, again):
            from ablate.sweep.sequential import SequentialQueue  # scipy: only when a sweep runs looks

            family = factorial_of(runs, factor_record(sweep)).family()
            return SequentialQueue(sweep, sweep_dir, planner, runs, todo, sweep.design(len(family)), save, again)
        return runs, sequential
    return runs, lambda todo, save, again: RunQueue(sweep, sweep_dir, runs, todo)


def launch(sweep: Sweep, *, extra: list[str], sweep_dir: Path | None, workers: int, dry_run: bool,
           retry_failed: bool, progress: bool = True, runs_per_gpu: str | int = 1,
           runner: Any = None, fuse: str | int = "auto") -> tuple[Path, list[PlannedRun], Outcome | None]:
    """Plan every run (validating each config), then run the pending ones unless ``dry_run``.

    A bayes sweep plans its points as it goes: its dry run plans (and shows) the first point only.
    ``runner``: where runs train (:class:`ablate.sweep.ray_backend.RayRunner`); default this machine's pool of
    ``workers`` (``runs_per_gpu`` on each GPU); ``fuse``: which seeds train as seed arrays there
    (:func:`ablate.sweep.arrays.fusing`; a ``runner`` trains every run alone).
    """
    sweep_dir = sweep_dir or default_sweep_dir(sweep)
    if runner is not None:  # its runs train on other machines, which share the filesystem but not our cwd
        sweep_dir = sweep_dir.resolve()
    _claim(sweep, sweep_dir, extra, write=False)  # before the plan: a plan can read the folder (a bayes sweep's)
    planner = Planner(sweep, extra, check=not dry_run)
    runs, queue_for = plan_queue(sweep, sweep_dir, planner, dry_run=dry_run)
    if dry_run:
        return sweep_dir, runs, None
    _claim(sweep, sweep_dir, extra, write=True)
    if sweep.path.resolve() != (sweep_dir / "sweep.yaml").resolve():
        shutil.copyfile(sweep.path, sweep_dir / "sweep.yaml")
    evaluate = sweep.evaluate_options()
    todo, settled = pending(runs, sweep_dir, retry_failed, evaluate)
    queue = queue_for(todo, lambda all_runs: write_plan(sweep, sweep_dir, all_runs),
                      lambda added: pending(added, sweep_dir, retry_failed, evaluate)[0])
    todo_ids = {r.id for r in queue.todo}  # a sequential design may have added the seeds earlier looks asked for
    runs = queue.runs
    write_plan(sweep, sweep_dir, runs)
    if queue.planned_ahead:  # the others plan as they go: their bar counts
        print(start_note(sweep.name, runs, list(queue.todo), sweep_dir,
                         sweep.decide.most_runs(len({r.variant for r in runs}))), file=sys.stderr)
    earlier = [r for r in runs if r.id not in todo_ids]  # ended in an earlier launch
    if runner is not None:
        where, train = runner.slots(None if queue.total is None else queue.total - len(earlier)), runner.train
    else:
        biggest = max((r.parameters for r in runs), default=0)
        need = training_bytes(planner.base, biggest) if runs else None
        gpus = pool.visible_gpus()  # looked up at the call: what the pool sees now (and what a test fakes)
        per_gpu = processes_per_gpu(runs_per_gpu, fuse, gpus)
        where, train = slots(workers=workers, runs_per_gpu=per_gpu, gpus=gpus,
                             run_bytes=need if per_gpu == "auto" else None), None
        rule = fusing(fuse, gpus=gpus, slots_per_gpu=max(1, len(where) // max(1, len(gpus))), run_bytes=need)
    outcome = execute(queue, lambda r: OmegaConf.to_yaml(run_config(sweep, r.overrides, sweep_dir / r.run_dir, extra,
                                                                     r.labels)),
                      sweep_dir, slots=where, train=train, progress=progress, evaluate=evaluate,
                      hyperband=sweep.early_terminate, metric=sweep.metric["name"], goal=sweep.metric["goal"],
                      settled=earlier, fusing=None if runner is not None else rule)
    outcome.failed = {**settled.failed, **outcome.failed}
    outcome.skipped += settled.skipped
    return sweep_dir, runs, outcome
