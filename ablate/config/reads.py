"""Which config keys a resolved run reads, so that a key set to no effect is refused instead of swept.

A variant says what it reads by the context it takes (:meth:`ablate.registry.Entry.reads`): only the
``parallel_text`` task takes ``max_tokens``, so under a generated task (``reverse``) ``data.max_tokens``
does nothing. A key that some
variant reads, and that the rest of ablate does not read by itself (:data:`CORE_READS`), is read by a
run only when one of the run's chosen variants reads it. A few keys depend on other settings instead
(:data:`UNREAD_WHEN`). Keys set on the command line, by a sweep's base overrides, rows or parameters
are checked against this before anything runs (:func:`ablate.config.load_config` calls :func:`check_reads`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterable

from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.config.dims import dims
from ablate.errors import NoEffect

# Keys read outside the components, whatever the variants: the model's input layer and output, the trainer.
CORE_READS = frozenset({"model.dropout", "data.vocab_size", "data.pad_id", "data.bos_id", "data.eos_id",
                        "train.max_steps", "seed", "model.n_encoder_layers", "model.n_decoder_layers"})

# Keys that a setting elsewhere makes pointless: (key or section prefix, when, why).
UNREAD_WHEN: tuple[tuple[str, Callable[[DictConfig], bool], str], ...] = (
    ("model.n_encoder_layers", lambda c: c.model.arch == "decoder_only", "model.arch=decoder_only has no encoder"),
    ("wandb.", lambda c: c.logger == "none", "logger=none logs nothing to W&B"),
    ("train.checkpoint_every", lambda c: c.train.keep_checkpoints == 0,
     "train.keep_checkpoints=0 keeps no step checkpoints (set it to keep some)"),
)


def _chosen(cfg: DictConfig) -> list[registry.Entry]:
    return [registry.get(k.name, OmegaConf.select(cfg, k.key)) for k in registry.kinds().values()]


def component_keys() -> dict[str, list[tuple[str, str]]]:
    """Each key some variant reads (beyond :data:`CORE_READS`), with the (kind, variant) pairs that read it."""
    return _component_keys(registry.version())


@lru_cache(maxsize=8)
def _component_keys(version: tuple[int, int]) -> dict[str, list[tuple[str, str]]]:
    owners: dict[str, list[tuple[str, str]]] = {}
    for kind in registry.kinds():
        for entry in registry.entries(kind):
            for key in entry.reads() - CORE_READS:
                if not key.endswith("."):  # a whole section read by a variant that does not say more
                    owners.setdefault(key, []).append((kind, entry.name))
    return owners


def unread_reason(cfg: DictConfig, key: str) -> str | None:
    """Why the run ``cfg`` does not read ``key``; None when it does (or the key is not one ablate tracks)."""
    for prefix, when, why in UNREAD_WHEN:
        if (key == prefix or (prefix.endswith(".") and key.startswith(prefix))) and when(cfg):
            return why
    owners = component_keys().get(key)
    if not owners:
        return None
    chosen = _chosen(cfg)
    if any(key == r or (r.endswith(".") and key.startswith(r)) for e in chosen for r in e.reads()):
        return None
    kind = owners[0][0]
    readers = "|".join(name for k, name in owners if k == kind)
    current = OmegaConf.select(cfg, registry.kind(kind).key)
    return f"{kind} {current!r} does not read {key}; {registry.kind(kind).key}={readers} would"


def check_reads(cfg: DictConfig, keys: Iterable[tuple[str, Any, str]]) -> None:
    """Refuse a key that was set but that the run does not read.

    Args:
        cfg: the resolved run config.
        keys: (dotted key, value, source) of each value set by a sweep or on the command line.

    Raises:
        NoEffect: a ConfigError naming the key, the value, its source and why it has no effect.
    """
    for key, value, source in keys:
        why = unread_reason(cfg, key)
        if why is not None:
            raise NoEffect(key, value, why, source)


def effective(cfg: DictConfig) -> dict[str, Any]:
    """What decides the trained model: the config without what is not read, how it is logged or where it is
    written, with d_k and d_v resolved. Two runs with equal ``effective`` configs train the same model."""
    data = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    for key in ("name", "output_dir", "wandb", "logger", "imports", "paths"):
        data.pop(key, None)
    data["model"].update({k: v for k, v in dims(cfg.model).items() if k in ("d_k", "d_v")})
    data["trainer"].pop("enable_progress_bar", None)
    flat = flatten(data)
    return {k: v for k, v in flat.items() if unread_reason(cfg, k) is None}


def flatten(node: dict[str, Any], prefix: str = "", *, into_lists: bool = False) -> dict[str, Any]:
    """A nested config as dotted keys (``{"model": {"d_model": 512}}`` -> ``{"model.d_model": 512}``); an empty
    mapping stays a value of its own key; ``into_lists``: a list's items too (``train.betas.0``), else a list is a
    value."""
    out: dict[str, Any] = {}
    items = enumerate(node) if isinstance(node, list) else node.items()
    for key, value in items:
        if (isinstance(value, dict) and value) or (into_lists and isinstance(value, list)):
            out.update(flatten(value, f"{prefix}{key}.", into_lists=into_lists))
        else:
            out[f"{prefix}{key}"] = value
    return out


def keys_and_parents(node: dict[str, Any]) -> list[str]:
    """Every dotted key of a nested config, each mapping's own key before its children's (``model``,
    ``model.d_model``, ...)."""
    out: dict[str, None] = {}
    for key in flatten(node):
        parts = key.split(".")
        out.update(dict.fromkeys(".".join(parts[:i]) for i in range(1, len(parts) + 1)))
    return list(out)
