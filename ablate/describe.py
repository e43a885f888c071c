"""``ablate describe``: what a config builds, without touching data."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from ablate.model import count_parameters
from ablate.model.flops import count_flops, sequence_length
from ablate.model.meta import build_on_meta
from ablate.config.dims import dims


def describe(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config, the model's dimensions, its parameter counts (total and per part) and its training
    FLOPs per target token (:mod:`ablate.model.flops`).

    The vocabulary size comes from ``data.vocab_size``; no data is read, and the
    model is built on the meta device, so no memory is allocated for its weights.
    """
    model = build_on_meta(cfg)
    return {
        "config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "dims": dims(cfg.model),
        "parameters": count_parameters(model),
        "flops_per_token": count_flops(model, cfg),
        "flops_length": sequence_length(cfg, model),
    }
