"""Which runs can train as a seed array (:mod:`ablate.train.array`): placeholder replaced by the registry's rule."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ablate import registry


def why_not_fused(cfg: DictConfig) -> str | None:
    """None when runs of ``cfg`` can train as members of a seed array; else why not, in one line."""
    for kind in registry.kinds().values():
        name = OmegaConf.select(cfg, kind.key)
        if isinstance(name, str) and name in registry.names(kind.name):
            why = registry.get(kind.name, name).not_fusable
            if why:
                return f"{kind.name} {name!r}: {why}"
    return None
