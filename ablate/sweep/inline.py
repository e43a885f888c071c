"""A sweep written on the command line: ``ablate sweep CONFIG --rows KEY=V1,V2 --seeds 3 --margin 0.1``.

Hydra's multirun (``-m model.ffn=relu,swiglu``) without a file: the config is the base row, and each value of each
``--rows KEY=V1,V2,...`` is a row that changes that one key (a value the base already has is the base). The sweep
file this makes is an ordinary one (:mod:`ablate.sweep.spec`): the launch copies it into the sweep folder as
``sweep.yaml``, so the sweep is relaunched, reported and shared from that file like any other.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from ablate.errors import COMMAND_LINE, ConfigError, check_name
from ablate.paths import find_file
from ablate.yamlio import load_yaml

DEFAULT_SEEDS = 3  # the seeds a command-line sweep runs when --seeds is not given: the fewest a verdict can read


def parse_rows(items: list[str]) -> list[tuple[str, list[Any]]]:
    """``--rows KEY=V1,V2`` options as (key, values), each value read as YAML reads it (``0.1`` a number).

    Raises:
        ConfigError: an item without ``=``, an empty value, or a key given twice.
    """
    out: list[tuple[str, list[Any]]] = []
    for item in items:
        key, eq, text = item.partition("=")
        values = [v.strip() for v in text.split(",")]
        if not eq or not key.strip() or not all(values):
            raise ConfigError("--rows", item, "KEY=VALUE[,VALUE...], e.g. --rows model.ffn=relu,swiglu",
                              COMMAND_LINE)
        if key in (k for k, _ in out):
            raise ConfigError("--rows", item, f"each key once ({key} is given already): its values, comma-separated",
                              COMMAND_LINE)
        out.append((key.strip(), [load_yaml(v) for v in values]))
    return out


def inline_sweep(config: str, rows: list[str], *, seeds: int | None, margin: float | None,
                 name: str | None, overrides: list[str]) -> dict[str, Any]:
    """The sweep file's contents: ``config`` as the base row, a row per listed value that differs from the base's
    (read with the command line's ``overrides``, which stay the command line's), ``seeds`` replicates, and
    ``decide: {margin}`` when given.

    Raises:
        ConfigError: ``config`` is not a file, a key it does not have, no value that differs from the base, or a
            bad name, seed count or margin.
    """
    from ablate.config import load_config

    path = find_file(config, Path.cwd(), key="CONFIG", source=COMMAND_LINE, what="an existing config file")
    seeds = DEFAULT_SEEDS if seeds is None else seeds
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= 1000:
        raise ConfigError("--seeds", seeds, "a whole number of seeds from 1 to 1000", COMMAND_LINE)
    base = load_config(str(path), overrides)
    parsed = parse_rows(rows)
    shorts = [key.rsplit(".", 1)[-1] for key, _ in parsed]
    table: list[dict[str, Any]] = [{"name": "base"}]
    for (key, values), short in zip(parsed, shorts):
        if OmegaConf.select(base, key, default=_MISSING) is _MISSING:
            raise ConfigError("--rows", key, f"a key of {config} (it has no {key})", COMMAND_LINE)
        label = short if shorts.count(short) == 1 else key
        have = OmegaConf.select(base, key)
        table += [{"name": f"{label}={_text(v)}", key: v} for v in values if v != have]
    if len(table) == 1:
        raise ConfigError("--rows", " ".join(rows), "at least one value the base config does not have already "
                          "(every row would be the base)", COMMAND_LINE)
    stem = name or "_".join([path.stem, *dict.fromkeys(shorts)])
    sweep: dict[str, Any] = {"name": check_name(stem, "--name", COMMAND_LINE), "method": "grid",
                             "base": {"config": str(path.resolve())},
                             "rows": table, "parameters": {"seed": {"values": list(range(seeds))}}}
    if margin is not None:
        sweep["decide"] = {"margin": margin}
    return sweep


_MISSING = object()


def _text(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...").strip()


def write_inline(sweep: dict[str, Any]) -> Path:
    """The sweep written to a file of its own (in a new temporary folder); the launch copies it into the sweep
    folder, which is where the sweep is relaunched from."""
    folder = Path(tempfile.mkdtemp(prefix="ablate-sweep-"))
    path = folder / f"{sweep['name']}.yaml"
    path.write_text("# written by ablate sweep CONFIG --rows ...: relaunch, report and share this file\n"
                    + yaml.safe_dump(sweep, sort_keys=False))
    return path
