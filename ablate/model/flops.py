"""Training FLOPs per target token, counted on the built model, for sweep planning and matched budgets.

The count is not a formula: the model a config builds runs one forward and backward pass on the meta
device (no memory, no arithmetic) under ``torch.utils.flop_counter.FlopCounterMode``, which adds up
the FLOPs of every matrix product, attention included. So a user's component is counted as it is,
with no declaration. Norms, softmax, activations and the optimiser are left out (they are not matmuls).
"""

from __future__ import annotations

from functools import lru_cache

import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.flop_counter import FlopCounterMode

from ablate.components.positional import Positional
from ablate.config.schema import Arch


def sequence_length(cfg: DictConfig, model: torch.nn.Module | None = None) -> int:
    """The length FLOPs are counted at: ``data.max_len`` capped at 512, and at what the positions allow."""
    T = min(cfg.data.max_len, 512)
    if model is not None:
        for module in model.modules():
            if isinstance(module, Positional) and module.max_len is not None:
                T = min(T, module.max_len)
    return T


def flops_per_token(cfg: DictConfig, seq_len: int | None = None) -> float:
    """Training FLOPs (forward and backward) per target token, sources and targets ``seq_len`` long.

    Args:
        cfg: a validated run config.
        seq_len: tokens per sequence; default :func:`sequence_length`.

    Returns:
        FLOPs per target token (2 per multiply-accumulate), for a batch of one sequence.
    """
    return _count(OmegaConf.to_yaml(cfg), seq_len)


@lru_cache(maxsize=256)
def _count(cfg_yaml: str, seq_len: int | None) -> float:
    from ablate.model.builder import build_model  # the builder imports every component

    cfg = OmegaConf.create(cfg_yaml)
    with torch.device("meta"):
        model = build_model(cfg)
        T = seq_len or sequence_length(cfg, model)
        ids = torch.full((1, T), max(cfg.data.pad_id, cfg.data.bos_id, cfg.data.eos_id) + 1, dtype=torch.long)
        counter = FlopCounterMode(display=False)
        with counter:
            logits = model(ids) if cfg.model.arch == Arch.decoder_only.value else model(ids, ids)
            logits.sum().backward()
    return counter.get_total_flops() / T
