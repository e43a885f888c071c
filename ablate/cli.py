"""The ``ablate`` command: train, describe, components.

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
    from ablate.train.run import RunFailed, train

    cfg = _load(args, config_required=False)
    try:
        run_dir = train(cfg)
    except RunFailed as failed:
        print(f"ablate: {failed}", file=sys.stderr)
        print(failed.run_dir)
        return 1
    print(run_dir)
    return 0


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
    selected = [args.kind] if args.kind else list(kinds)
    for kind in selected:
        entries = registry.entries(kind)
        print(f"{kind}: {kinds[kind]}")
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
    comps = sub.add_parser("components", help="list registered components")
    comps.add_argument("kind", nargs="?", help="only this kind")
    comps.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    comps.set_defaults(func=cmd_components)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"ablate: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
