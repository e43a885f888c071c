"""The run-level entry point: ``ablate train``, ``ablate train-array`` and ``ablate evaluate`` given their argv.

Both the ``ablate`` command (:mod:`ablate.cli`) and a sweep's warm worker (:mod:`ablate.sweep.warm`) run a run
through here, so a run forked from the warm server and one started fresh are the same program: the same grammar,
the same one-line errors and the same exit codes (2 bad input, 3 locked, 130/143 interrupted, 1 failure).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import Callable, Sequence

from ablate.errors import COMMAND_LINE, ConfigError
from ablate.evaluate.cli import add_evaluate_parser
from ablate.exits import EXIT_INTERRUPTED, EXIT_LOCKED, EXIT_PIPE, EXIT_USAGE
from ablate.runs.lock import RunLocked
from ablate.train.signals import Interrupted

DEFAULT_CONFIG = Path("configs/default.yaml")
CHOICES = ("model", "data", "train")  # what an override must choose for an empty config to be meant (not output_dir)


class UsageError(Exception):
    """A command line argparse cannot read: an unknown option, a missing argument, a value of the wrong type."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are exceptions (one line each), not a usage text and an exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def with_config(sub: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand that reads ``[CONFIG] key=value ...`` and ``--import MODULE``."""
    p = sub.add_parser(name, help=help, description=help)
    p.add_argument("items", nargs="*", metavar="CONFIG | key=value", help="a YAML config, then dotted overrides")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (it registers components); repeatable")
    return p


def add_train_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``train`` and ``train-array``; their ``func``: :func:`cmd_train` and :func:`cmd_train_array`."""
    with_config(sub, "train", "train one run; prints its run directory last").set_defaults(func=cmd_train)
    array = sub.add_parser("train-array", help="train runs of one variant that differ in seed alone as one fused "
                           "model (a seed array); each keeps its own run directory")
    array.add_argument("configs", nargs="+", metavar="CONFIG", help="each member's config (its output_dir and seed)")
    array.add_argument("--array-dir", default=None, metavar="DIR",
                       help="the array's own checkpoint folder (default: arrays/<hash> beside the runs' folder)")
    array.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import MODULE first (it registers components); repeatable")
    array.set_defaults(func=cmd_train_array)


def split_items(items: Sequence[str], config_required: bool) -> tuple[str | None, list[str]]:
    """Split ``[CONFIG] key=value ...`` into the config path and the overrides.

    Raises:
        ConfigError: two config files, or none where one is required.
    """
    config, overrides = None, []
    for item in items:
        if "=" in item:
            overrides.append(item)
        elif config is None:
            config = item
        else:
            raise ConfigError(item, item, f"one CONFIG file ({config} is one already) and key=value overrides",
                              COMMAND_LINE)
    if config is None and config_required:
        raise ConfigError("CONFIG", None, "a config file (e.g. configs/transformer_base.yaml)", COMMAND_LINE)
    return config, overrides


def load_items(config: str | None, overrides: list[str], imports: list[str]):
    """The config ``config`` (default: configs/default.yaml) with ``overrides``, after importing ``imports``."""
    from ablate.config import load_config

    if config is None:
        if not DEFAULT_CONFIG.is_file():
            raise ConfigError("CONFIG", None, f"a config file ({DEFAULT_CONFIG} is not in this folder)", COMMAND_LINE)
        config = str(DEFAULT_CONFIG)
    return load_config(config, overrides, imports=imports)


def refuse_if_empty(args: argparse.Namespace) -> None:
    """A config file that sets nothing would train the schema's defaults, the paper's base model (44M parameters) for
    100,000 steps: a file left empty by mistake, not a choice. The base model is one file away.

    Raises:
        ConfigError: the file sets nothing and no override chooses the model, data or training.
    """
    from ablate.yamlio import load_yaml_file

    config, overrides = split_items(args.items, config_required=False)
    chosen = [o for o in overrides if o.split(".", 1)[0] in CHOICES]
    if config is not None and not chosen and not load_yaml_file(Path(config), key="config", source=COMMAND_LINE):
        raise ConfigError("CONFIG", config, "a config that sets something: this one is empty, which would train the "
                          "paper's base model (6+6 layers, d_model 512) for 100,000 steps; to mean that, give "
                          "configs/transformer_base.yaml", COMMAND_LINE)


def cmd_train(args: argparse.Namespace) -> int:
    from pytorch_lightning.utilities.rank_zero import rank_zero_only

    from ablate.train.run import RunFailed, train
    from ablate.train.signals import sigterm_raises

    try:
        # From here on SIGTERM ends the command with its line and 143, as Ctrl-C does (130); not in the processes DDP
        # starts, which Lightning stops itself.
        with sigterm_raises() if rank_zero_only.rank == 0 else contextlib.nullcontext():
            refuse_if_empty(args)
            cfg = load_items(*split_items(args.items, config_required=False), args.imports)
            run_dir = train(cfg)
    except Interrupted as stopped:  # SIGINT, SIGTERM: 128 + the signal, as a shell reports a process it ended
        print(f"ablate: {stopped}", file=sys.stderr)
        return stopped.exit_code
    except RunFailed as failed:
        if os.environ.get("ABLATE_TRACEBACK") and failed.__cause__ is not None:
            traceback.print_exception(failed.__cause__)
        print(f"ablate: {failed}", file=sys.stderr)
        if not failed.removed:
            print(failed.run_dir)
        return 1
    if rank_zero_only.rank == 0:  # under DDP, the processes Lightning starts run this too
        print(run_dir)
    return 0


def cmd_train_array(args: argparse.Namespace) -> int:
    from ablate.config import load_config
    from ablate.train.array import train_array
    from ablate.train.run import RunFailed

    from ablate.train.signals import sigterm_raises

    try:
        with sigterm_raises():  # SIGTERM before the array trains ends the command with its line and 143, as in train
            cfgs = [load_config(path, [], imports=args.imports) for path in args.configs]
            run_dirs = train_array(cfgs, args.array_dir)
    except Interrupted as stopped:  # SIGINT, SIGTERM: 128 + the signal, as a solo run's
        print(f"ablate: {stopped}", file=sys.stderr)
        return stopped.exit_code
    except RunFailed as failed:
        print(f"ablate: {failed}", file=sys.stderr)
        return 1
    print("\n".join(str(d) for d in run_dirs))
    return 0


def run_command(args: argparse.Namespace) -> int:
    """The parsed command's exit code; a ``sys.exit()`` inside it (a user's module, a library) is no success."""
    try:
        return args.func(args)
    except SystemExit as exc:  # a subclass is a library's own signal (Lightning's SIGTERM): it keeps its meaning
        if type(exc) is not SystemExit or exc.code not in (0, None):
            raise
        raise RuntimeError(f"something the command ran called sys.exit({exc.code!r}) before it was done") from None


def guarded(command: Callable[[], int]) -> int:
    """``command()``'s exit code, whatever it raises ending as one line on stderr and its exit code: 2 bad input,
    3 (:data:`EXIT_LOCKED`) a run trained elsewhere, 130 Ctrl-C, 128 + the signal for SIGINT/SIGTERM, 141 a closed
    pipe, 1 anything else (``ABLATE_TRACEBACK=1`` shows its traceback)."""
    try:
        return command()
    except (ConfigError, UsageError) as err:
        print(f"ablate: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RunLocked as locked:  # another process trains this run: exit 3, which a sweep's pool tells apart
        print(f"ablate: error: {locked}", file=sys.stderr)
        return EXIT_LOCKED
    except KeyboardInterrupt:
        print("ablate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Interrupted as stopped:  # a run stopped by SIGINT or SIGTERM inside another command (a W&B agent's)
        print(f"ablate: {stopped}", file=sys.stderr)
        return stopped.exit_code
    except BrokenPipeError:  # the reader went away (`ablate sweep ... --dry-run | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not raise again
        return EXIT_PIPE
    except Exception as exc:  # a bug, or something no check foresaw: still one line, the traceback on request
        if os.environ.get("ABLATE_TRACEBACK"):
            traceback.print_exc()
        print(f"ablate: internal error: {type(exc).__name__}: {' '.join(str(exc).split())} "
              "(set ABLATE_TRACEBACK=1 to see where)", file=sys.stderr)
        return 1


def main(argv: Sequence[str]) -> int:
    """Run ``ablate train``, ``train-array`` or ``evaluate`` with ``argv`` (the command first); its exit code."""
    def command() -> int:
        parser = Parser(prog="ablate")
        sub = parser.add_subparsers(dest="command", parser_class=Parser)
        add_train_parsers(sub)
        add_evaluate_parser(sub)
        if not argv or argv[0] not in sub.choices:
            raise UsageError(f"ablate: {argv[0] if argv else ''!r} is not a run command; expected one of "
                             f"{', '.join(sub.choices)}")
        return run_command(sub.choices[argv[0]].parse_intermixed_args(list(argv[1:])))

    return guarded(command)
