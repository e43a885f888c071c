"""Load, compose, override and validate a run config.

A YAML file may start with ``defaults: [other.yaml, ...]`` (paths relative to
the file, then to ablate's shipped folder: :mod:`ablate.paths`); those are
merged first, in order, then the file itself, then the command-line overrides
(``model.n_heads=4``). A module in ``imports`` is found beside the file that names
it, and a relative ``data.path`` beside the file that sets it: the folders are
recorded in the run's ``paths`` (no part of its identity). Every value is checked against
the schema (:mod:`ablate.config.schema`) and the registry before anything
runs; a bad one raises :class:`ablate.errors.ConfigError` naming the key, the
value, what is allowed and the file it came from. A key set on the command line
or by a sweep that the resolved run does not read is refused too
(:mod:`ablate.config.reads`).
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

import ablate.components  # noqa: F401  (declares the built-in kinds and registers their variants)
import ablate.data  # noqa: F401  (registers the built-in tasks)
from ablate.paths import data_folders, find_file, folder_of
from ablate.config.reads import check_reads, flatten, keys_and_parents
from ablate.config.schema import run_schema
from ablate.config.validate import validate
from ablate.errors import COMMAND_LINE, ConfigError, UnknownKey
from ablate import registry
from ablate.registry import import_modules
from ablate.yamlio import load_yaml_file, yaml11_number

DOTTED = re.compile(r"[A-Za-z_][\w-]*(\.[\w-]+)*")  # model.d_model, train.betas.0, wandb.tags
INTERNAL = "ablate"  # a layer of ablate's own bookkeeping (a sweep run's directory and W&B labels): not read-checked


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[str] = (),
    *,
    imports: Iterable[str] = (),
    layers: Iterable[tuple[str, Iterable[str]]] = (),
    source: str = COMMAND_LINE,
    layer_imports: Iterable[tuple[str, Iterable[str]]] = (),
) -> DictConfig:
    """Compose a run config from a YAML file and dotted overrides, and validate it.

    Args:
        path: a YAML file; ``None`` for the schema defaults alone.
        overrides: ``key=value`` strings, applied last.
        imports: extra modules to import (they register components) besides
            the config's own ``imports`` key.
        layers: ``(source, overrides)`` groups applied after the file and before
            ``overrides``, each named in errors by its source (e.g. a sweep file).
        source: where ``path`` was named (a missing file is blamed on it, and a relative one is looked for beside
            it, then in ablate's shipped folder): the command line, or a sweep file.
        layer_imports: ``(source, modules)`` groups: modules named by a file other than a config (a sweep file's
            top-level ``imports``), added to the config's ``imports`` like ``imports`` and found beside ``source``.

    Returns:
        A read-only structured ``DictConfig`` of :class:`RunConfig`.

    Raises:
        ConfigError: a missing file, unknown key, wrong type or impossible combination.
    """
    if path is not None and not Path(path).is_file():
        path = find_file(path, folder_of(source) if source == COMMAND_LINE else _folder(source), key="config",
                         source=source)
    files = _chain(Path(path), seen=(), source=source) if path is not None else []
    groups = [(source, list(dotlist)) for source, dotlist in [*layers, (COMMAND_LINE, overrides)]]
    for source, dotlist in groups:
        for item in dotlist:
            if "=" not in item or item.startswith("="):
                raise ConfigError(item, item, "an override of the form key=value", source)
            key = item.split("=", 1)[0]
            if not DOTTED.fullmatch(key):
                raise ConfigError(key, item.split("=", 1)[1], "a dotted key of names (model.d_model): no empty part, "
                                  "no space", source)
            if why := yaml11_number(item.split("=", 1)[1]):
                raise ConfigError(key, item.split("=", 1)[1], f"a value read the same by every YAML ({why})", source)
    parsed = [(source, OmegaConf.to_container(OmegaConf.from_dotlist(dotlist)), dotlist) for source, dotlist in groups]
    # User modules first: they may declare kinds, whose keys the schema must have before anything merges.
    named = [(str(m), str(file)) for file, data in files for m in _list(data.get("imports"))]
    named += [(str(m), source) for source, data, _ in parsed for m in _list(data.get("imports"))]
    added = [(str(m), source) for source, modules in layer_imports for m in modules]
    added += [(str(m), COMMAND_LINE) for m in imports]
    folders = _import_folders(files, [*named, *added])
    _announce([*named, *((m, s) for m, s in added if s != COMMAND_LINE)])  # --import is the user's own word
    try:
        import_modules(dict.fromkeys(m for m, _ in [*named, *added]), folders)
    except ConfigError as err:
        raise err.at(dict([*named, *added]).get(str(err.value), COMMAND_LINE)) from None
    steps = [(str(file), data, [k for k in keys_and_parents(data or {}) if k.endswith("_args")])
             for file, data in files]
    steps += [(source, data, [i.split("=", 1)[0] for i in dotlist if i.split("=", 1)[0].endswith("_args")])
              for source, data, dotlist in parsed]
    sources = {key: source for source, data, _ in steps for key in keys_and_parents(data or {})}
    try:  # the plain data merged in Python, then once into the schema: fast
        cfg = OmegaConf.merge(run_schema(), _combine(steps))
    except OmegaConfBaseException:  # merge step by step, to name the file or layer at fault
        cfg = run_schema()
        for source, data, whole in steps:
            cfg = _merge(cfg, data, source, {}, whole)
        raise AssertionError("a config that fails to merge at once merged step by step")  # pragma: no cover
    if added:
        cfg.imports = list(cfg.imports) + [m for m in dict.fromkeys(m for m, _ in added) if m not in cfg.imports]
        sources["imports"] = added[-1][1]
    _resolve(cfg, sources)
    _record_paths(cfg, sources, folders)
    try:
        validate(cfg)
    except ConfigError as err:
        raise err.at(_source_of(err.key, sources)) from None
    _fill_component_defaults(cfg)
    check_reads(cfg, [(key, OmegaConf.select(cfg, key), source) for source, data, _ in parsed if source != INTERNAL
                      for key in flatten(data or {})])
    OmegaConf.set_readonly(cfg, True)
    return cfg


_announced: set[str] = set()


def _announce(named: list[tuple[str, str]]) -> None:
    """Say on stderr, once per module and before importing it, which file's ``imports`` runs which module: a config
    with imports runs code (the documented way to register components), and describe or --dry-run run it too."""
    for module, source in named:
        if module not in _announced and module not in sys.modules:
            _announced.add(module)
            print(f"ablate: note: importing {module} (named by {source}'s imports: a config's imports run code)",
                  file=sys.stderr)


ENVIRONMENT = re.compile(r"\$\{\s*(oc\.)?env\s*:")


def _resolve(cfg: DictConfig, sources: dict[str, str]) -> None:
    """Resolve every ``${...}`` interpolation now, so a bad one is one line naming its key; refuse environment
    variables: the resolved config is copied into the run directory, its checkpoints and W&B, and a secret
    (``${oc.env:WANDB_API_KEY}``) would go with it.

    Raises:
        ConfigError: an interpolation that reads the environment or does not resolve.
    """
    raw = OmegaConf.to_container(cfg, resolve=False)
    for key, value in flatten(raw, into_lists=True).items():
        if isinstance(value, str) and ENVIRONMENT.search(value):
            raise ConfigError(key, value, "a value written out: configs do not read environment variables (the "
                              "resolved config is copied into the run directory, checkpoints and W&B)",
                              _source_of(key, sources))
    try:
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as exc:
        key = str(getattr(exc, "full_key", "") or "?")
        value = flatten(raw, into_lists=True).get(key, "?")
        raise ConfigError(key, value, f"an interpolation that resolves ({str(exc).strip().splitlines()[0]})",
                          _source_of(key, sources)) from None


def _combine(steps: list[tuple[str, Any, list[str]]]) -> dict[str, Any]:
    """The steps' data merged as plain dicts, in order: a mapping merges key by key, except the ``whole`` keys
    of a step (a component's ``*_args`` given as one mapping), which replace what came before."""
    out: dict[str, Any] = {}
    for _, data, whole in steps:
        _deep_update(out, data, set(whole), "")
    return out


def _deep_update(target: dict[str, Any], data: Any, whole: set[str], prefix: str) -> None:
    for key, value in (data or {}).items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(target.get(key), dict) and path not in whole:
            _deep_update(target[key], value, whole, f"{path}.")
        else:
            target[key] = copy.deepcopy(value)


def _fill_component_defaults(cfg: DictConfig) -> None:
    """Write each chosen variant's default parameters into its ``<key>_args``, so the resolved config (config.yaml,
    W&B, the run's identity) holds every value the run uses, e.g. noam's ``warmup: 4000``."""
    for kind in registry.kinds().values():
        args = OmegaConf.select(cfg, kind.args_key)
        for param in registry.get(kind.name, OmegaConf.select(cfg, kind.key)).params:
            if param.name not in args and not param.required and _plain(param.default):
                args[param.name] = param.default


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _list(value: Any) -> list[Any]:
    return [] if value is None else (list(value) if isinstance(value, (list, tuple)) else [value])


def _folder(source: str) -> Path | None:
    """The folder a path named by ``source`` is relative to (:func:`ablate.paths.folder_of`)."""
    return folder_of(source) if source != INTERNAL else None


def _import_folders(files: list[tuple[Path, dict[str, Any]]], named: list[tuple[str, str]]) -> list[str]:
    """The folders the named modules are looked for in, absolute: each naming file's own (a run's config.yaml: the
    folders it recorded, ``paths.imports``), the current folder for the command line's."""
    out: list[str] = []
    recorded = {str(file): (data.get("paths") or {}).get("imports") for file, data in files}
    for source in dict.fromkeys(source for _, source in named):
        if isinstance(recorded.get(source), list):
            out += [str(f) for f in recorded[source]]
        elif (folder := _folder(source)) is not None:
            out.append(os.path.abspath(folder))
    return list(dict.fromkeys(out))


def _record_paths(cfg: DictConfig, sources: dict[str, str], import_folders: list[str]) -> None:
    """Fill ``paths``: the folders of the imports, and those a relative ``data.path`` is looked for in (kept as a
    run's config.yaml recorded them when it sets both, else beside the file that set ``data.path``)."""
    cfg.paths.imports = list(dict.fromkeys([*cfg.paths.imports, *import_folders]))
    setter = sources.get("data.path")
    if sources.get("paths.data") != setter or setter is None:
        cfg.paths.data = data_folders(cfg.data.path, _folder(setter) if setter else None)


def _chain(path: Path, seen: tuple[Path, ...], source: str = COMMAND_LINE) -> list[tuple[Path, dict[str, Any]]]:
    """The files to merge for ``path``: its ``defaults`` (recursively), then itself."""
    where = seen[-1] if seen else source
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        raise ConfigError("config", str(path), f"an existing YAML file ({' '.join(str(exc).split())})", str(where)) \
            from None
    if resolved in seen:
        raise ConfigError("defaults", str(path), "no cycles between config files", str(path))
    data = load_yaml_file(path, key="config", source=str(where)) or {}
    if not isinstance(data, dict):
        raise ConfigError("<root>", type(data).__name__, "a mapping of keys to values", str(path))
    defaults = data.pop("defaults", []) or []
    if isinstance(defaults, str):
        defaults = [defaults]
    if not isinstance(defaults, list) or not all(isinstance(d, str) for d in defaults):
        raise ConfigError("defaults", defaults, "a config file, or a list of them, to merge first", str(path))
    out: list[tuple[Path, dict[str, Any]]] = []
    for parent in defaults:
        found = find_file(parent, path.parent, key="defaults", source=str(path))
        out += _chain(found, seen + (resolved,), source)
    return out + [(path, data)]


def _merge(cfg: DictConfig, data: Any, source: str, sources: dict[str, str], whole: Iterable[str]) -> DictConfig:
    """Merge ``data`` into ``cfg``; the ``whole`` keys (a component's ``*_args`` given as one mapping)
    replace what was there, so switching ``train.schedule`` does not inherit the previous schedule's
    arguments, while a dotted key inside (``model.mask_args.window=4``) changes that one argument."""
    replaced = [key for key in whole if isinstance(OmegaConf.select(cfg, key), DictConfig)]
    if replaced:
        cfg = cfg.copy()  # OmegaConf.merge makes a new config; the replaced keys are cleared in a copy first
        for key in replaced:
            OmegaConf.update(cfg, key, {}, merge=False)
    try:
        merged = OmegaConf.merge(cfg, data)
    except ConfigKeyError as exc:
        raise _unknown_key(cfg, exc.full_key or str(exc.key)).at(source) from None
    except OmegaConfBaseException as exc:
        raise ConfigError(exc.full_key or "<root>", exc.value, _allowed(exc), source) from None
    for key in keys_and_parents(data or {}):
        sources[key] = source
    return merged


def _allowed(exc: OmegaConfBaseException) -> str:
    """What the schema accepts, in words, from OmegaConf's validation message."""
    msg = (exc.msg or str(exc)).splitlines()[0]
    if match := re.search(r"expected one of \[(.*)\]", msg):
        return f"one of {match.group(1)}"
    if match := re.search(r"could not be converted to (\w+)", msg):
        return f"a value of type {match.group(1)}"
    return msg


RENAMED = {  # keys of earlier versions, and what replaced them
    "model.tie_embeddings": "model.embedding (tied | two_way | untied | factorized)",
    "model.scale_embeddings": "model.embedding_args.scale",
}


def _unknown_key(cfg: DictConfig, full_key: str) -> ConfigError:
    if full_key in RENAMED:
        return UnknownKey(full_key, f"{RENAMED[full_key]}, which replaces it")
    parent, _, leaf = full_key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    known = list(node.keys()) if isinstance(node, DictConfig) else []
    close = difflib.get_close_matches(leaf, known, n=1)
    if not close:  # the key may live elsewhere: `lr` is train.lr, `model.lr` too
        anywhere = _schema_keys(cfg)
        tails = {key.rsplit(".", 1)[-1]: key for key in reversed(anywhere)}
        near = difflib.get_close_matches(leaf, list(tails), n=1, cutoff=0.75)
        close = [tails[near[0]]] if near else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    where = f"'{parent}'" if parent else "the top level"
    return UnknownKey(full_key, f"a key of {where}: {', '.join(known)}{hint}")


def _schema_keys(cfg: DictConfig) -> list[str]:
    """Every dotted key of the schema (not inside a component's ``*_args``), in order."""
    return [k for k in keys_and_parents(OmegaConf.to_container(cfg, enum_to_str=True)) if "_args." not in k]


def _source_of(key: str, sources: dict[str, str]) -> str:
    """The file that last set ``key`` (or its nearest parent); the schema default otherwise."""
    while key:
        if key in sources:
            return sources[key]
        key = key.rpartition(".")[0]
    return "defaults"
