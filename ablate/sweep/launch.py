"""``ablate sweep``: plan, print (``--dry-run``) or run, then report."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ablate.runs.owner import check_folder, claim, sweep_identity
from ablate.sweep.memory import training_bytes
from ablate.sweep.plan import (Planner, PlannedRun, base_variant, default_sweep_dir, factor_record, factorial_of,
                               plan_record, read_planned, run_config, write_plan)
from ablate.sweep.progress import start_note
from ablate.sweep.queue import BayesQueue, RunQueue, StreamQueue
from ablate.sweep.arrays import fusing, processes_per_gpu
from ablate.sweep.runner import Outcome, execute, pending, slots, visible_gpus
from ablate.sweep.spec import Sweep


DRY_RUN_POINTS = 10  # the points an open-ended sweep's dry run shows


def format_matrix(sweep: Sweep, runs: list[PlannedRun]) -> str:
    """The run matrix (one line per run: varied values, parameters, FLOPs per token), then what each variant
    changes in the built run against the base, matched budgets, and the variants that train the same model."""
    keys = list(runs[0].varied) if runs else []
    header = ["run", "variant", "seed", *keys, "params", "FLOPs/token"]
    rows = [[r.id, r.variant, str(r.seed), *(str(r.varied[k]) for k in keys), f"{r.parameters / 1e6:.3f}M",
             f"{r.flops_per_token:.3g}"] for r in runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    if sweep.open_ended:
        count = (f"open-ended: points are {'chosen as runs finish' if sweep.method == 'bayes' else 'drawn'} until "
                 "Ctrl-C or SIGTERM (finished runs kept, running ones resumed by a relaunch), a run reaches "
                 "metric.target, or --max-runs; the first " + ("point's" if sweep.method == "bayes" else
                                                               f"{len(runs)}") + " runs")
    elif sweep.method == "bayes":
        count = f"up to {sweep.n_samples() * len(sweep.seeds)} runs, chosen as runs finish; the first point's"
    else:
        count = f"{len(runs)} runs"
    if sweep.decide.max_seeds:
        n = sweep.decide.max_seeds
        count += (f" to start (sequential design: a seed at a time to undecided rows, up to {n} seeds each, "
                  f"{sweep.decide.most_runs(len({r.variant for r in runs}))} runs at most)")
    title = (f"sweep {sweep.name}: {count}, method {sweep.method}, "
             f"metric {sweep.metric['name']} ({sweep.metric['goal']})")
    fresh = [r for r in runs if r.fresh_seed]
    notes = [f"{len(fresh)} runs repeat an earlier draw (W&B runs every draw): each with the next seed its variant "
             f"had not used ({', '.join(f'{r.variant}: seed {r.seed}' for r in fresh[:3])}"
             f"{', ...' if len(fresh) > 3 else ''})", ""] if fresh else []
    return "\n".join([title, *lines, "", *notes, *family_note(sweep, runs), *variant_notes(runs)])


def family_note(sweep: Sweep, runs: list[PlannedRun]) -> list[str]:
    """What the report will compare, when the design crosses factors: the family's contrasts by kind."""
    from collections import Counter

    factorial = factorial_of(runs, factor_record(sweep))
    if len(factorial.factors) < 2:
        return []
    counts = Counter(c.kind for c in factorial.family())
    names = {"simple": "row"}  # a simple contrast is a row of the table: a row against its stratum's base
    kinds = ", ".join(f"{n} {names.get(kind, kind)}{'s' * (n > 1)}" for kind, n in counts.items())
    missing = f"; no base row at {', '.join(factorial.missing)}: its rows are not compared" if factorial.missing else ""
    others = ", ".join(f.name for f in factorial.factors if f.name != "row")
    return [f"comparisons: {sum(counts.values())} in one family ({kinds}); each row against the base row at the same "
            f"{others}{missing}", ""]


def plan_json(sweep: Sweep, runs: list[PlannedRun]) -> str:
    """``--dry-run --json``: the plan as plan.json would hold it, with how many runs the sweep makes (``runs``
    null: open-ended, ``planned`` then lists its first points) and ablate's notes on the file."""
    total = None if sweep.open_ended else (sweep.n_samples() * len(sweep.seeds) if sweep.method == "bayes"
                                           else len(runs))
    record = {**plan_record(sweep, runs), "open_ended": sweep.open_ended, "total_runs": total,
              "notes": sweep.notes()}
    return json.dumps(record, indent=2, default=str)


def variant_notes(runs: list[PlannedRun]) -> list[str]:
    """Per variant, against the base: parameters, matched budget, changed modules and settings; twins flagged."""
    variants = {r.variant: r for r in reversed(runs)}  # the first run of each variant
    base = base_variant(runs)
    out = [f"what each variant changes in the built run, against {base!r}:"]
    base_params = variants[base].parameters if base in variants else None
    for name, r in reversed(list(variants.items())):
        delta = (f" ({(r.parameters - base_params) / base_params:+.2%})"
                 if base_params and r.parameters != base_params else "")
        parts = [f"{r.parameters / 1e6:.3f}M params{delta}"]
        if r.matched:
            m = r.matched
            parts.append(f"matched {m['budget']}: {m['by']}={m['value']} gives {m['achieved']:.6g} for the base's "
                         f"{m['target']:.6g} ({m['error']:+.2%})")
        if r.leaks_labels:
            parts.append("its mask leaks labels (every position scored): losses not comparable")
        if r.same_as:
            parts.append(f"SAME MODEL AND TRAINING AS {r.same_as!r}: it differs only in keys that change nothing")
        elif name != base and not r.changes and not r.matched:
            parts.append("no change to the model or its training besides the seed")
        out.append(f"  {name}: " + "; ".join(parts + r.changes))
    return out


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
    planner, stream = Planner(sweep, extra, check=not dry_run), None
    if sweep.method == "bayes":
        from ablate.sweep.bayes import BayesSearch

        if dry_run:
            search = BayesSearch(sweep)
            u = search.ask()[1]  # one point, once per seed
            runs = planner.plan([search.point(u, seed) for seed in sweep.seeds])
        else:
            runs = read_planned(sweep_dir)
    elif sweep.open_ended:  # the draws an earlier launch made, drawn again (the stream is the sampler seed's)
        stream = planner.runs(sweep.stream())
        runs = list(itertools.islice(stream, DRY_RUN_POINTS * len(sweep.seeds) if dry_run else
                                     len(read_planned(sweep_dir))))
    else:
        runs = planner.plan(sweep.points())
    if dry_run:
        return sweep_dir, runs, None
    _claim(sweep, sweep_dir, extra, write=True)
    if sweep.path.resolve() != (sweep_dir / "sweep.yaml").resolve():
        shutil.copyfile(sweep.path, sweep_dir / "sweep.yaml")
    evaluate = sweep.evaluate_options()
    todo, settled = pending(runs, sweep_dir, retry_failed, evaluate)
    todo_ids = {r.id for r in todo}
    save = lambda all_runs: write_plan(sweep, sweep_dir, all_runs)  # noqa: E731
    if sweep.method == "bayes":
        queue: RunQueue = BayesQueue(sweep, sweep_dir, planner, runs, save, lambda run: run.id not in todo_ids)
    elif stream is not None:
        queue = StreamQueue(sweep, sweep_dir, runs, todo, stream, save)
    elif sweep.decide.max_seeds:
        from ablate.sweep.sequential import SequentialQueue  # scipy: only when a sweep runs looks

        family = factorial_of(runs, factor_record(sweep)).family()
        queue = SequentialQueue(sweep, sweep_dir, planner, runs, todo, sweep.design(len(family)), save,
                                lambda added: pending(added, sweep_dir, retry_failed, evaluate)[0])
        todo_ids = {r.id for r in queue.todo}
    else:
        queue = RunQueue(sweep, sweep_dir, runs, todo)
    runs = queue.runs  # a sequential design may have added the seeds an earlier launch's looks asked for
    write_plan(sweep, sweep_dir, runs)
    if sweep.method != "bayes" and stream is None:  # open-ended and bayes sweeps plan as they go: their bar counts
        print(start_note(sweep.name, runs, list(queue.todo), sweep_dir,
                         sweep.decide.most_runs(len({r.variant for r in runs}))), file=sys.stderr)
    earlier = [r for r in runs if r.id not in todo_ids]  # ended in an earlier launch
    if runner is not None:
        where, train = runner.slots(None if queue.total is None else queue.total - len(earlier)), runner.train
    else:
        biggest = max((r.parameters for r in runs), default=0)
        need = training_bytes(planner.base, biggest) if runs else None
        gpus = visible_gpus()
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
