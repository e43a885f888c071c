"""``ablate train``, ``ablate describe`` and ``ablate components``: one run, what a config builds, what exists."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Sequence

from ablate.errors import COMMAND_LINE, ConfigError, UnknownKey

DEFAULT_CONFIG = Path("configs/default.yaml")
CHOICES = ("model", "data", "train")  # what an override must choose for an empty config to be meant (not output_dir)


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


def load(args: argparse.Namespace, config_required: bool):
    from ablate.config import load_config

    config, overrides = split_items(args.items, config_required)
    if config is None:
        if not DEFAULT_CONFIG.is_file():
            raise ConfigError("CONFIG", None, f"a config file ({DEFAULT_CONFIG} is not in this folder)", COMMAND_LINE)
        config = str(DEFAULT_CONFIG)
    try:
        return load_config(config, overrides, imports=args.imports)
    except UnknownKey as err:
        from ablate.sweep.read import ABLATE_KEYS, W_AND_B_KEYS

        if err.source == config and err.key in (W_AND_B_KEYS | ABLATE_KEYS):  # e.g. method, rows: a sweep's keys
            raise UnknownKey(err.key, f"{err.allowed}; {config} is a sweep file: ablate sweep {config}",
                             err.source) from None
        raise


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
    from ablate.train.signals import Interrupted, sigterm_raises

    try:
        # From here on SIGTERM ends the command with its line and 143, as Ctrl-C does (130); not in the processes DDP
        # starts, which Lightning stops itself.
        with sigterm_raises() if rank_zero_only.rank == 0 else contextlib.nullcontext():
            refuse_if_empty(args)
            cfg = load(args, config_required=False)
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

    cfgs = [load_config(path, [], imports=args.imports) for path in args.configs]
    try:
        run_dirs = train_array(cfgs, args.array_dir)
    except RunFailed as failed:
        print(f"ablate: {failed}", file=sys.stderr)
        return 1
    print("\n".join(str(d) for d in run_dirs))
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from ablate.describe import describe

    cfg = load(args, config_required=True)
    info = describe(cfg)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(OmegaConf.to_yaml(cfg), end="")
    print("\nparameters")
    for part, n in info["parameters"].items():
        print(f"  {part:<12} {n:>14,}  ({n / 1e6:.2f}M)")
    print(f"\ntraining FLOPs per target token: {info['flops_per_token']:.4g} (sequences of {info['flops_length']})")
    return 0


def cmd_components(args: argparse.Namespace) -> int:
    from ablate import registry

    registry.import_modules(args.imports)
    kinds = registry.kinds()
    selected = [registry.kind(args.kind).name] if args.kind is not None else list(kinds)
    if args.markdown:  # the README's table of what is faithful and what is a variant
        print("| key | name [parameters] | | what it is |\n|---|---|---|---|")
        for kind in selected:
            default = kinds[kind].default
            for e in sorted(registry.entries(kind), key=lambda e: e.name != default):
                params = f" [{', '.join(p.name for p in e.params)}]" if e.params else ""
                role = "paper" if e.name == default else "variant"
                description = e.description.replace('|', chr(92) + '|')
                print(f"| `{kinds[kind].key}` | `{e.name}`{params} | {role} | {description} |")
        return 0
    width = max((len(name) for kind in selected for name in registry.names(kind)), default=0)
    for kind in selected:
        print(f"{kind}: {kinds[kind].description}  [{kinds[kind].key}, default {kinds[kind].default}]")
        for e in registry.entries(kind):
            params = ", ".join(p.describe() for p in e.params)
            print(f"  {e.name:<{width}} {e.description}" + (f"  [{params}]" if params else ""))
    return 0
