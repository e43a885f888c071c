"""The command line's grammar: every subcommand, its options, and errors that fit on one line.

Options and ``key=value`` overrides may come in any order (each subcommand is parsed with
``parse_intermixed_args``); a mistake argparse finds is raised as :class:`UsageError`, one line, instead of
a usage dump.
"""

from __future__ import annotations

import argparse
import difflib
from typing import Callable, Sequence

from ablate.cli.sweep import MAX_WORKERS
from ablate.entry import Parser, UsageError, add_train_parsers, with_config
from ablate.evaluate.cli import add_attention_parser, add_evaluate_parser, add_generate_parser
from ablate.options import Number
from ablate.sweep.slots import RUNS_PER_GPU

__all__ = ["Parser", "UsageError", "build_parser", "parse"]


def build_parser(commands: dict[str, Callable]) -> tuple[Parser, dict[str, Parser]]:
    """The ``ablate`` parser and each subcommand's, with ``func`` set from ``commands`` (name -> function)."""
    parser = Parser(prog="ablate", description="Transformer ablation studies: swap one component, train, compare.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    add_train_parsers(sub)
    describe = with_config(sub, "describe", "print the resolved config and parameter counts")
    describe.add_argument("--json", action="store_true", help="machine-readable output")
    sweep = sub.add_parser("sweep", help="run a sweep file (W&B sweep format) locally, through W&B agents or on Ray")
    sweep.add_argument("sweep", metavar="SWEEP.yaml")
    sweep.add_argument("overrides", nargs="*", metavar="key=value", help="applied to every run")
    sweep.add_argument("--workers", type=Number(1, MAX_WORKERS, integer=True), default=None,
                       help="runs at a time on this machine (default: one per GPU; on a CPU, min(4, cores), each "
                            "with an equal share of the cores)")
    sweep.add_argument("--runs-per-gpu", default=RUNS_PER_GPU, metavar="K|auto",
                       help="processes sharing each GPU (auto, the default: two, each a seed array filling half its "
                            "memory, when seeds fuse; else as many runs as its free memory holds)")
    sweep.add_argument("--fuse", default="auto", metavar="auto|on|off|N",
                       help="train each variant's seeds as one fused model (a seed array): auto (default) fuses on a "
                            "GPU, as many as its memory holds, and not on a CPU; on; off; or at most N an array")
    sweep.add_argument("--dry-run", action="store_true", help="print the run matrix and run nothing")
    sweep.add_argument("--no-probe", action="store_true",
                       help="skip the short probe of each run shape that projects the sweep's wall time (the dry run "
                            "prints it, the launch records it in projection.json); ABLATE_PROBE=off skips it too")
    sweep.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON (the matrix, or the "
                       "first points of an open-ended sweep)")
    sweep.add_argument("--max-runs", type=Number(1, integer=True), default=None, metavar="N",
                       help="at most N runs in the sweep (its run_cap, or a cap on an open-ended random or bayes "
                            "sweep, which otherwise runs until stopped)")
    sweep.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    sweep.add_argument("--change-design", action="store_true",
                       help="relaunch under a design (method, decide: margin, max_seeds, alpha, first seeds; the "
                            "rows; the base config, which gives the runs new ids) other than the first launch's: "
                            "every look is replayed and every row judged under the new one")
    sweep.add_argument("--max-seeds", type=int, default=None, metavar="N",
                       help="sequential design: add seeds to undecided rows, up to N each (the sweep's "
                            "decide.max_seeds)")
    sweep.add_argument("--out", metavar="DIR", help="sweep directory (default sweeps/<name>)")
    inline = sweep.add_argument_group("a sweep on the command line", "ablate sweep CONFIG --rows KEY=V1,V2 ...: "
                                      "CONFIG is the base row; the sweep file it makes is kept as "
                                      "<sweep dir>/sweep.yaml")
    inline.add_argument("--rows", action="append", default=None, metavar="KEY=V1,V2",
                        help="a row for each value of KEY (repeatable: each key its own rows against the base)")
    inline.add_argument("--seeds", type=Number(1, 1000, integer=True), default=None, metavar="N",
                        help="with --rows: seeds 0..N-1 for every row (default 3)")
    inline.add_argument("--margin", type=Number(0, above=True), default=None,
                        help="with --rows: the equivalence margin (decide.margin), in the metric's units")
    inline.add_argument("--name", default=None, help="with --rows: the sweep's name (default: CONFIG's and the keys')")
    sweep.add_argument("--backend", choices=["local", "wandb", "ray", "slurm"], default="local",
                       help="local pool (default), W&B's controller and agents, a Ray cluster, or Slurm")
    sweep.add_argument("--address", default=None,
                       help="ray: the cluster to join (default: RAY_ADDRESS, else a local one)")
    sweep.add_argument("--gpus-per-run", type=Number(0), default=None,
                       help="ray: GPUs per run, fractions pack runs; slurm: GPUs per job (a whole number)")
    sweep.add_argument("--cpus-per-run", type=Number(0, above=True), default=None,
                       help="ray, slurm: CPUs per run (per job)")
    slurm = sweep.add_argument_group("slurm", "each job's resources, over the sweep file's slurm: section")
    slurm.add_argument("--partition", default=None, help="slurm: the partition")
    slurm.add_argument("--account", default=None, help="slurm: the account")
    slurm.add_argument("--qos", default=None, help="slurm: the quality of service")
    slurm.add_argument("--mem-per-run", type=float, default=None, metavar="GB", help="slurm: memory per job, GB")
    slurm.add_argument("--time-limit", type=int, default=None, metavar="MIN",
                       help="slurm: each job's time limit, minutes (a run that reaches it saves its step and is "
                            "requeued)")
    slurm.add_argument("--max-jobs", type=int, default=None, metavar="N", help="slurm: jobs queued or running at once")
    slurm.add_argument("--sbatch", action="append", default=None, metavar="--OPTION[=VALUE]",
                       help="slurm: one more #SBATCH option (repeatable), e.g. --sbatch=--constraint=a100")
    status = sub.add_parser("status", help="what a sweep is doing: its runs' states and steps, what each row's next "
                            "look waits for, the time left (while it runs, or after)")
    status.add_argument("sweep", metavar="SWEEP.yaml|SWEEP_DIR")
    report = sub.add_parser("report", help="comparison table and HTML report of a sweep")
    report.add_argument("sweep", metavar="SWEEP.yaml|SWEEP_DIR")
    report.add_argument("--wide", action="store_true", help="every column of the table and what they mean, however "
                        "wide (by default the verdict view, fitted to the terminal: COLUMNS, else its width)")
    sync = sub.add_parser("sync", help="upload offline W&B runs (of a sweep or a run directory)")
    sync.add_argument("targets", nargs="+", metavar="SWEEP.yaml|DIR")
    agent = sub.add_parser("agent", help="join a W&B sweep started with `ablate sweep --backend wandb`")
    agent.add_argument("sweep_id", metavar="SWEEP_ID", help="entity/project/id")
    agent.add_argument("--count", type=Number(1, integer=True), default=None, help="stop after this many points")
    add_evaluate_parser(sub)
    add_generate_parser(sub)
    add_attention_parser(sub)
    comps = sub.add_parser("components", help="list registered components")
    comps.add_argument("kind", nargs="?", help="only this kind")
    comps.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    comps.add_argument("--markdown", action="store_true",
                       help="one Markdown table row per variant: key, name [parameters], paper or variant, description")
    subparsers = dict(sub.choices)
    for name, p in subparsers.items():
        p.set_defaults(func=commands[name])
    return parser, subparsers


def parse(argv: Sequence[str], commands: dict[str, Callable]) -> argparse.Namespace | None:
    """The parsed command line; None when only --help or --version was asked for (already answered).

    Raises:
        UsageError: an unknown subcommand, option or value.
    """
    parser, subparsers = build_parser(commands)
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return None
    if argv[0] == "--version":
        from ablate import __version__

        print(f"ablate {__version__}")
        return None
    name = argv[0]
    if name not in subparsers:
        close = difflib.get_close_matches(name, list(subparsers), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"ablate: {name!r} is not a command; expected one of {', '.join(subparsers)}{hint}")
    return subparsers[name].parse_intermixed_args(argv[1:])
