"""The ``ablate`` command: train, describe, components, sweep, report, sync, agent, evaluate, generate, attention.

Bad input is one line on stderr and exit code 2, before anything is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from omegaconf import OmegaConf

from ablate.errors import ConfigError
from ablate.evaluate.cli import add_attention_parser, add_evaluate_parser, add_generate_parser
from ablate.runs.lock import EXIT_LOCKED, RunLocked

DEFAULT_CONFIG = Path("configs/default.yaml")


def _split_args(items: Sequence[str], config_required: bool) -> tuple[str | None, list[str]]:
    """Split ``[CONFIG] key=value ...`` into the config path and the overrides."""
    config, overrides = None, []
    for item in items:
        if "=" in item:
            overrides.append(item)
        elif config is None:
            config = item
        else:
            raise ConfigError(item, item, "one CONFIG file followed by key=value overrides", "command line")
    if config is None and config_required:
        raise ConfigError("CONFIG", None, "a config file (e.g. configs/transformer_base.yaml)", "command line")
    return config, overrides


def _load(args: argparse.Namespace, config_required: bool):
    from ablate.config import load_config

    config, overrides = _split_args(args.items, config_required)
    if config is None:
        if not DEFAULT_CONFIG.is_file():
            raise ConfigError("CONFIG", None, f"a config file ({DEFAULT_CONFIG} is not in this folder)", "command line")
        config = str(DEFAULT_CONFIG)
    return load_config(config, overrides, imports=args.imports)


def cmd_train(args: argparse.Namespace) -> int:
    from pytorch_lightning.utilities.rank_zero import rank_zero_only

    from ablate.train.run import RunFailed, train

    cfg = _load(args, config_required=False)
    try:
        run_dir = train(cfg)
    except RunFailed as failed:
        print(f"ablate: {failed}", file=sys.stderr)
        print(failed.run_dir)
        return 1
    except RunLocked as locked:
        print(f"ablate: {locked}", file=sys.stderr)
        return EXIT_LOCKED
    if rank_zero_only.rank == 0:  # under DDP, the processes Lightning starts run this too
        print(run_dir)
    return 0


def _sweep_dir(target: str) -> Path:
    """A sweep directory, or the default directory of a sweep file."""
    from ablate.sweep import default_sweep_dir, load_sweep

    path = Path(target)
    if path.is_dir():
        if not (path / "plan.json").is_file():
            raise ConfigError("SWEEP", target, "a sweep file or a sweep directory holding plan.json", "command line")
        return path
    return default_sweep_dir(load_sweep(path))


def cmd_sweep(args: argparse.Namespace) -> int:
    from ablate.sweep import load_sweep
    from ablate.sweep.launch import format_matrix, launch

    if args.workers < 1:
        raise ConfigError("--workers", args.workers, "a positive integer", "command line")
    sweep = load_sweep(args.sweep)
    if args.backend == "wandb":
        from ablate.sweep.wandb_backend import start_wandb_sweep

        return start_wandb_sweep(sweep, extra=args.overrides, dry_run=args.dry_run)
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        raise ConfigError(bad[0], bad[0], "an override of the form key=value", "command line")
    if sweep.ignored:
        print(f"ablate: warning: {sweep.path}: {', '.join(sweep.ignored)} not used: ablate runs its own training "
              "(ablate train) for every run", file=sys.stderr)
    sweep_dir, runs, outcome = launch(sweep, extra=args.overrides, sweep_dir=Path(args.out) if args.out else None,
                                      workers=args.workers, dry_run=args.dry_run, retry_failed=args.retry_failed)
    if outcome is None:
        print(format_matrix(sweep, runs))
        return 0
    _print_report(sweep_dir)
    if outcome.closed:
        print(f"ablate: no further run started: {outcome.closed}", file=sys.stderr)
    if outcome.stopped:
        print(f"ablate: {len(outcome.stopped)} runs stopped early by hyperband (see their result.json)", file=sys.stderr)
    if outcome.failed:
        print(f"ablate: {len(outcome.failed)} of {len(runs)} runs failed (see their result.json)", file=sys.stderr)
    print(sweep_dir)
    return 1 if outcome.failed else 0


def _print_report(sweep_dir: Path) -> None:
    """Build the sweep's report, write its files, print its table, and put the table in W&B when the
    runs logged there."""
    from ablate.report import build_report, format_terminal, upload_table, write_report

    report = build_report(sweep_dir)
    write_report(report, sweep_dir / "report")
    print(format_terminal(report))
    configs = sorted((sweep_dir / "runs").glob("*/config.yaml"))
    cfg = OmegaConf.load(configs[0]) if configs else None
    if cfg is not None and cfg.get("logger") == "wandb":
        w = cfg.wandb
        upload_table(report, project=w.project, entity=w.entity, group=w.group or report.name,
                     save_dir=sweep_dir / "report", mode=w.mode)


def cmd_report(args: argparse.Namespace) -> int:
    sweep_dir = _sweep_dir(args.sweep)
    _print_report(sweep_dir)
    print(sweep_dir / "report" / "report.html")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from ablate.runs.wandb import sync

    return sync([_sweep_dir(t) if t.endswith((".yaml", ".yml")) else Path(t) for t in args.targets])


def cmd_agent(args: argparse.Namespace) -> int:
    from ablate.sweep.wandb_backend import run_agent

    return run_agent(args.sweep_id, count=args.count)


def cmd_describe(args: argparse.Namespace) -> int:
    from ablate.describe import describe

    cfg = _load(args, config_required=True)
    info = describe(cfg)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(OmegaConf.to_yaml(cfg), end="")
    print("\nparameters")
    for part, n in info["parameters"].items():
        print(f"  {part:<12} {n:>14,}  ({n / 1e6:.2f}M)")
    return 0


def cmd_components(args: argparse.Namespace) -> int:
    from ablate import registry

    registry.import_modules(args.imports)
    kinds = registry.kinds()
    selected = [registry.kind(args.kind).name] if args.kind else list(kinds)
    for kind in selected:
        entries = registry.entries(kind)
        print(f"{kind}: {kinds[kind].description}  [{kinds[kind].key}, default {kinds[kind].default}]")
        for e in entries:
            params = ", ".join(p.describe() for p in e.params)
            print(f"  {e.name:<16} {e.description}" + (f"  [{params}]" if params else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ablate", description="Transformer ablation studies.")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("items", nargs="*", metavar="CONFIG | key=value", help="a YAML config, then dotted overrides")
        p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import MODULE first (it registers components); repeatable")
        return p

    with_config("train", "train one run; prints its run directory last").set_defaults(func=cmd_train)
    describe = with_config("describe", "print the resolved config and parameter counts")
    describe.add_argument("--json", action="store_true", help="machine-readable output")
    describe.set_defaults(func=cmd_describe)
    sweep = sub.add_parser("sweep", help="run a sweep file (W&B sweep format) locally or through W&B agents")
    sweep.add_argument("sweep", metavar="SWEEP.yaml")
    sweep.add_argument("overrides", nargs="*", metavar="key=value", help="applied to every run")
    sweep.add_argument("--workers", type=int, default=1, help="CPU worker processes (GPUs: one per device)")
    sweep.add_argument("--dry-run", action="store_true", help="print the run matrix and run nothing")
    sweep.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    sweep.add_argument("--out", metavar="DIR", help="sweep directory (default sweeps/<name>)")
    sweep.add_argument("--backend", choices=["local", "wandb"], default="local")
    sweep.set_defaults(func=cmd_sweep)
    report = sub.add_parser("report", help="comparison table and HTML report of a sweep")
    report.add_argument("sweep", metavar="SWEEP.yaml|SWEEP_DIR")
    report.set_defaults(func=cmd_report)
    sync = sub.add_parser("sync", help="upload offline W&B runs (of a sweep or a run directory)")
    sync.add_argument("targets", nargs="+", metavar="SWEEP.yaml|DIR")
    sync.set_defaults(func=cmd_sync)
    agent = sub.add_parser("agent", help="join a W&B sweep started with `ablate sweep --backend wandb`")
    agent.add_argument("sweep_id", metavar="SWEEP_ID", help="entity/project/id")
    agent.add_argument("--count", type=int, default=None, help="stop after this many runs")
    agent.set_defaults(func=cmd_agent)
    add_evaluate_parser(sub)
    add_generate_parser(sub)
    add_attention_parser(sub)
    comps = sub.add_parser("components", help="list registered components")
    comps.add_argument("kind", nargs="?", help="only this kind")
    comps.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    comps.set_defaults(func=cmd_components)
    return parser


HEAVY = {"train", "sweep", "evaluate", "agent"}  # commands that train or decode: worth a fast allocator


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] in HEAVY:  # a real command line, not a caller's list
        from ablate.runtime import apply_fast_allocator

        apply_fast_allocator(sys.argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"ablate: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
