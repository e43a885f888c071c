"""``ablate train``, ``ablate describe`` and ``ablate components``: one run, what a config builds, what exists."""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from ablate.entry import DEFAULT_CONFIG, cmd_train_array, load_items, refuse_if_empty, split_items
from ablate.entry import cmd_train as entry_train
from ablate.errors import UnknownKey

__all__ = ["cmd_components", "cmd_describe", "cmd_train", "cmd_train_array", "refuse_if_empty", "split_items"]


def _with_sweep_hint(config: str, load: Callable[[], Any]) -> Any:
    """``load()``; a key of a sweep file in ``config`` (e.g. method, rows) is refused with the sweep's command."""
    try:
        return load()
    except UnknownKey as err:
        from ablate.sweep.read import ABLATE_KEYS, W_AND_B_KEYS

        if err.source == config and err.key in (W_AND_B_KEYS | ABLATE_KEYS):  # e.g. method, rows: a sweep's keys
            raise UnknownKey(err.key, f"{err.allowed}; {config} is a sweep file: ablate sweep {config}",
                             err.source) from None
        raise


def load(args: argparse.Namespace, config_required: bool):
    config, overrides = split_items(args.items, config_required)
    return _with_sweep_hint(config or str(DEFAULT_CONFIG), lambda: load_items(config, overrides, args.imports))


def cmd_train(args: argparse.Namespace) -> int:
    """``ablate train`` as :mod:`ablate.entry` runs it (a sweep's warm worker too), a sweep file named as such."""
    return _with_sweep_hint(split_items(args.items, config_required=False)[0] or str(DEFAULT_CONFIG),
                            lambda: entry_train(args))


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
