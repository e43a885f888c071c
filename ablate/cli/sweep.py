"""``ablate sweep``, ``ablate report``, ``ablate sync`` and ``ablate agent``: many runs, and what they found."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from dataclasses import replace
from pathlib import Path

from ablate.errors import COMMAND_LINE, ConfigError
from ablate.exits import signal_exit
from ablate.sweep.slots import AUTO, RUNS_PER_GPU
from ablate.runs.files import CONFIG_FILE, config_path
from ablate.runs import sweep_folder
from ablate.runs.plan import plan_path
from ablate.runs.sweep_folder import REPORT_PAGE, default_sweep_dir, runs_dir, sweep_file


def default_workers() -> int:
    """Runs at a time on this machine: one per GPU; on a CPU, min(4, cores), each with an equal share of the
    cores (small models train faster per core on one thread than large ones on several)."""
    import torch

    from ablate.train.threads import usable_cores

    if torch.cuda.is_available():
        return torch.cuda.device_count()
    return max(1, min(4, usable_cores()))


def sweep_dir_of(target: str) -> Path:
    """The directory of a sweep that has been launched: the given sweep directory, or a sweep file's.

    Raises:
        ConfigError: neither holds a plan yet (the sweep has not been launched).
    """
    from ablate.sweep import default_sweep_dir, load_sweep

    path = Path(target)
    if not path.exists():
        raise ConfigError("SWEEP", target, "a sweep's directory (holding plan.json) or its sweep file: nothing is "
                          "there", COMMAND_LINE)
    if path.is_dir():
        if not plan_path(path).is_file():
            run = "; it is a run's folder, whose numbers are in result.json" if config_path(path).is_file() else ""
            raise ConfigError("SWEEP", target, "a sweep's directory, holding plan.json, or its sweep file (this "
                              f"folder has no plan.json{run})", COMMAND_LINE)
        return path
    folder = default_sweep_dir(load_sweep(path))
    if not plan_path(folder).is_file():
        raise ConfigError("SWEEP", target, f"a sweep that has been launched: {plan_path(folder)} does not exist "
                          f"yet (ablate sweep {target} first, or give the sweep's directory)", COMMAND_LINE)
    return folder


MAX_WORKERS = 1024  # processes one machine runs side by side, at most (each holds its own Python and torch)


def _check(args: argparse.Namespace) -> None:
    """What the options' types (:mod:`ablate.options`) cannot check alone: the words, and options read together."""
    if args.runs_per_gpu != AUTO and not (args.runs_per_gpu.isdigit() and 1 <= int(args.runs_per_gpu) <= MAX_WORKERS):
        raise ConfigError("--runs-per-gpu", args.runs_per_gpu, f"a positive integer up to {MAX_WORKERS}, or auto",
                          COMMAND_LINE)
    for option in ("gpus_per_run", "cpus_per_run"):
        value = getattr(args, option)
        if value is None:
            continue
        if args.backend == "ray" and not 0 < value < float("inf"):
            raise ConfigError(f"--{option.replace('_', '-')}", value, "a positive number", COMMAND_LINE)
        if args.backend == "slurm" and not (value == int(value) and value >= (option == "cpus_per_run")):
            raise ConfigError(f"--{option.replace('_', '-')}", value, "a whole number of "
                              + ("CPUs, at least 1" if option == "cpus_per_run" else "GPUs"), COMMAND_LINE)
        if args.backend not in ("ray", "slurm"):
            raise ConfigError(f"--{option.replace('_', '-')}", value, "nothing: it is for --backend ray or slurm",
                              COMMAND_LINE)
    for option in SLURM_OPTIONS:
        if getattr(args, option) is not None and args.backend != "slurm":
            raise ConfigError(f"--{option.replace('_', '-')}", getattr(args, option),
                              "nothing: it is for --backend slurm", COMMAND_LINE)
    fuse = str(args.fuse)
    if not (fuse in ("auto", "on", "off") or (fuse.isdigit() and 1 <= int(fuse) <= MAX_WORKERS)):
        raise ConfigError("--fuse", args.fuse, f"auto, on, off, or a number of seeds an array from 1 to {MAX_WORKERS}",
                          COMMAND_LINE)
    if args.json and not args.dry_run:
        raise ConfigError("--json", True, "nothing without --dry-run: it prints the plan as JSON", COMMAND_LINE)
    for option in INLINE_OPTIONS:
        if getattr(args, option, None) is not None and not args.rows:
            raise ConfigError(f"--{option}", getattr(args, option), "nothing without --rows: a sweep file sets it "
                              "(ablate sweep CONFIG --rows KEY=V1,V2 writes one)", COMMAND_LINE)
    if args.address is not None and args.backend != "ray":
        raise ConfigError("--address", args.address, "nothing: it is for --backend ray", COMMAND_LINE)
    bad = [o for o in args.overrides if "=" not in o or o.startswith("=")]
    if bad:
        raise ConfigError(bad[0], bad[0], "an override of the form key=value", COMMAND_LINE)


SLURM_OPTIONS = ("partition", "account", "qos", "mem_per_run", "time_limit", "max_jobs", "sbatch")  # --backend slurm's
# (option, attribute, its default): what a relaunch repeats of the command line
RELAUNCH_OPTIONS = (("--out", "out", None), ("--workers", "workers", None),
                    ("--runs-per-gpu", "runs_per_gpu", RUNS_PER_GPU), ("--fuse", "fuse", "auto"),
                    ("--max-runs", "max_runs", None), ("--max-seeds", "max_seeds", None),
                    ("--backend", "backend", "local"), ("--address", "address", None),
                    ("--gpus-per-run", "gpus_per_run", None), ("--cpus-per-run", "cpus_per_run", None),
                    *((f"--{o.replace('_', '-')}", o, None) for o in SLURM_OPTIONS))


def relaunch_command(args: argparse.Namespace) -> str:
    """The command that resumes this sweep, from any folder: the same sweep file (a command-line sweep's: the copy in
    its sweep folder, once written) and sweep folder (``--out``), both absolute, then the overrides and options."""
    sweep, inline = getattr(args, "relaunch_sweep", None), []
    if sweep is None:
        sweep = args.sweep
    elif not Path(sweep).is_file():  # stopped before the launch kept the file: the command as given
        sweep = args.config_given
        inline = [f"--rows={r}" for r in args.rows] + [f"--{o}={getattr(args, o)}" for o in INLINE_OPTIONS
                                                       if getattr(args, o, None) is not None]
    words = ["ablate", "sweep", os.path.abspath(sweep), *args.overrides, *inline]
    out = args.out or getattr(args, "sweep_dir", None)  # the launch's folder: sweeps/<name> is the shell folder's
    for option, name, default in RELAUNCH_OPTIONS:
        value = os.path.abspath(out) if name == "out" and out else getattr(args, name, default)
        if isinstance(value, list):  # a repeatable option (--sbatch)
            words += [f"{option}={v}" for v in value]
        elif value != default and value is not None:
            words += [option, str(value)]
    flags = [f for f, on in (("--retry-failed", args.retry_failed), ("--change-design", args.change_design)) if on]
    return shlex.join(words + flags)


INLINE_OPTIONS = ("seeds", "margin", "name")  # what only a sweep written with --rows takes from the command line


def _write_inline(args: argparse.Namespace) -> None:
    """``ablate sweep CONFIG --rows ...``: the sweep file it makes, in ``args.sweep``; the relaunch command names the
    copy the launch keeps in the sweep folder (:mod:`ablate.sweep.inline`)."""
    from ablate.sweep.inline import inline_sweep, write_inline

    spec = inline_sweep(args.sweep, args.rows, seeds=args.seeds, margin=args.margin, name=args.name,
                        overrides=args.overrides)
    args.config_given, args.sweep = args.sweep, str(write_inline(spec))
    args.relaunch_sweep = str(sweep_file(Path(args.out) if args.out else default_sweep_dir(spec["name"])))


def cmd_sweep(args: argparse.Namespace) -> int:
    from ablate.sweep import load_sweep
    from ablate.cli.matrix import format_matrix, plan_json
    from ablate.sweep.launch import launch
    from ablate.sweep.read import check_overrides, check_runnable

    _check(args)
    if args.rows:
        _write_inline(args)
    sweep = load_sweep(args.sweep)
    args.sweep_dir = args.out or str(default_sweep_dir(sweep.name))  # what the relaunch command names
    check_runnable(sweep)
    check_overrides(sweep, args.overrides)
    if args.max_seeds is not None:
        from ablate.sweep.decide import check_max_seeds
        from ablate.sweep.read import check_sequential

        sweep.decide = replace(sweep.decide, max_seeds=check_max_seeds(args.max_seeds, "--max-seeds", COMMAND_LINE))
        check_sequential(sweep, "--max-seeds")
    if args.max_runs is not None:
        if sweep.decide.max_seeds:
            raise ConfigError("--max-runs", args.max_runs, "nothing with a sequential design (decide.max_seeds "
                              "sets how many runs a row gets)", COMMAND_LINE)
        sweep.run_cap = min(sweep.run_cap or args.max_runs, args.max_runs)
    for note in sweep.notes(args.backend):
        print(f"ablate: warning: {sweep.path}: {note}", file=sys.stderr)
    if args.backend == "wandb":
        from ablate.sweep.wandb_backend import start_wandb_sweep

        if sweep.decide.max_seeds:
            raise ConfigError("decide.max_seeds", sweep.decide.max_seeds, "no sequential design with --backend wandb: "
                              "W&B's agents take points, not looks (run it locally or with --backend ray)",
                              str(sweep.path))
        return start_wandb_sweep(sweep, extra=args.overrides, dry_run=args.dry_run)
    runner = None
    if args.backend == "ray":
        from ablate.sweep.ray_backend import RayRunner

        runner = RayRunner.connect(args.address, gpus_per_run=args.gpus_per_run, cpus_per_run=args.cpus_per_run,
                                   dry_run=args.dry_run)
    if args.backend == "slurm":
        from ablate.sweep.slurm_backend import SlurmBackend

        whole = {k: None if getattr(args, k) is None else int(getattr(args, k)) for k in ("gpus_per_run",
                                                                                         "cpus_per_run")}
        settings = sweep.slurm.updated({**whole, "partition": args.partition, "account": args.account,
                                        "qos": args.qos, "mem_gb": args.mem_per_run, "time_min": args.time_limit,
                                        "max_jobs": args.max_jobs, "sbatch": args.sbatch}, COMMAND_LINE)
        runner = SlurmBackend.connect(settings, dry_run=args.dry_run)
    notes: list[str] = []
    from ablate.train.signals import FROM_OUTSIDE, sigterm_raises, stopped_by

    try:
        with sigterm_raises():  # SIGTERM (a scheduler's preemption) stops the sweep as Ctrl-C does
            sweep_dir, runs, outcome = launch(sweep, extra=args.overrides,
                                              sweep_dir=Path(args.out) if args.out else None,
                                              workers=args.workers or default_workers(),
                                              runs_per_gpu=args.runs_per_gpu, dry_run=args.dry_run,
                                              retry_failed=args.retry_failed, cluster=runner, fuse=args.fuse,
                                              notes=None if args.json else notes,
                                              change_design=args.change_design,
                                              probe=False if args.no_probe or args.json else None)
    except FROM_OUTSIDE as stop:
        signum = stopped_by(stop)
        if args.backend == "slurm":
            print(f"ablate: interrupted by {signal.Signals(signum).name}: the Slurm jobs go on (squeue lists them); "
                  f"the launcher waits for them again, and submits what is missing, with: {relaunch_command(args)}",
                  file=sys.stderr)
            return signal_exit(signum)
        print(f"ablate: interrupted by {signal.Signals(signum).name}: ended runs are kept, the others resume from "
              f"their checkpoints with: {relaunch_command(args)}", file=sys.stderr)
        return signal_exit(signum)
    if outcome is None:
        print(plan_json(sweep, runs) if args.json else "\n".join([format_matrix(sweep, runs), "", *notes]))
        return 0
    print_report(sweep_dir)
    if outcome.closed:
        print(f"ablate: no further run started: {outcome.closed}", file=sys.stderr)
    if outcome.stopped:
        print(f"ablate: {len(outcome.stopped)} runs stopped early by hyperband (see their result.json)",
              file=sys.stderr)
    if outcome.interrupted:
        print(f"ablate: {len(outcome.interrupted)} runs interrupted: launch the sweep again to resume them",
              file=sys.stderr)
    if outcome.failed:
        print(f"ablate: {len(outcome.failed)} of {len(runs)} runs failed (see their result.json)", file=sys.stderr)
    if args.rows:
        print(f"ablate: the sweep file: {sweep_file(sweep_dir)} (relaunch, report and share it: "
              f"{relaunch_command(args)})", file=sys.stderr)
    print(sweep_dir)
    return 1 if outcome.failed or outcome.interrupted else 0


def print_report(sweep_dir: Path, *, wide: bool = False) -> bool:
    """Build the sweep's report, print its table (the verdict view; every column with ``wide``), write its files, and
    put the table in W&B when the runs logged there. Returns whether the files were written (a read-only sweep gets
    its table printed all the same)."""
    from ablate.report import build_report, format_terminal, upload_table, write_report
    from ablate.report.render import terminal_width, wants_colour
    from ablate.runs.files import read_run_config
    from ablate.runs.owner import check_folder, mark

    report_dir = sweep_folder.report_dir(sweep_dir)
    check_folder(report_dir, "report", None, key="SWEEP")
    report = build_report(sweep_dir)
    print(format_terminal(report, wide=wide, colour=wants_colour(sys.stdout), width=terminal_width(sys.stdout)))
    try:
        mark(report_dir, "report", None)
        write_report(report, report_dir)
    except OSError as exc:
        print(f"ablate: warning: the report's files were not written to {sweep_dir / 'report'} ({exc.strerror}); "
              "the table above is the whole report", file=sys.stderr)
        return False
    configs = sorted(runs_dir(sweep_dir).glob(f"*/{CONFIG_FILE}"))
    cfg = read_run_config(configs[0].parent) if configs else None
    if cfg is not None and cfg.get("logger") == "wandb":
        w = cfg.wandb
        upload_table(report, project=w.project, entity=w.entity, group=w.group or report.name,
                     save_dir=report_dir, mode=w.mode)
    return True


def cmd_report(args: argparse.Namespace) -> int:
    sweep_dir = sweep_dir_of(args.sweep)
    if print_report(sweep_dir, wide=args.wide):
        print(sweep_folder.report_dir(sweep_dir) / REPORT_PAGE)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ablate.sweep.status import status_lines

    print("\n".join(status_lines(sweep_dir_of(args.sweep))))
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from ablate.runs.wandb import sync

    paths = []
    for target in args.targets:
        path = sweep_dir_of(target) if target.endswith((".yaml", ".yml")) else Path(target)
        if not path.exists():
            raise ConfigError("DIR", target, "a sweep file, a sweep directory or a run directory", COMMAND_LINE)
        paths.append(path)
    return sync(paths)


def cmd_agent(args: argparse.Namespace) -> int:
    from ablate.sweep.wandb_backend import run_agent

    return run_agent(args.sweep_id, count=args.count)
