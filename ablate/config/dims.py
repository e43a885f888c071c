"""A model config's resolved dimensions: arithmetic on the config, for the builder and for every reader of a run's
size (the memory estimate, ``ablate describe``, which keys a run reads)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from ablate.registry import CONTEXT


def dims(model_cfg: DictConfig) -> dict[str, Any]:
    """The resolved dimensions of a model config: d_k and d_v default to d_model / h (section 3.2.2)."""
    m = model_cfg
    return {
        "d_model": m.d_model,
        "n_heads": m.n_heads,
        "d_k": m.d_k if m.d_k is not None else m.d_model // m.n_heads,
        "d_v": m.d_v if m.d_v is not None else m.d_model // m.n_heads,
        "d_ff": m.d_ff,
        "dropout": m.dropout,
    }


def layer_counts(model_cfg: DictConfig) -> tuple[int, int]:
    """(encoder layers, decoder layers): ``n_encoder_layers`` / ``n_decoder_layers``, else ``n_layers``."""
    return model_cfg.n_encoder_layers or model_cfg.n_layers, model_cfg.n_decoder_layers or model_cfg.n_layers


def context(cfg: DictConfig) -> dict[str, Any]:
    """What the assembler can pass to a factory, by :data:`ablate.registry.CONTEXT` name: each name's config key read
    from ``cfg`` (a section's name, ``data.``, gets the section), with the dimensions resolved (d_k, d_v, the layer
    counts). Build-time names (``stack``, ``layer``, ``cross``, ``decoder_only``) are the builder's to add."""
    out = {name: OmegaConf.select(cfg, key.rstrip(".")) for name, key in CONTEXT.items() if key}
    n_encoder, n_decoder = layer_counts(cfg.model)
    return {**out, **dims(cfg.model), "n_encoder_layers": n_encoder, "n_decoder_layers": n_decoder}
