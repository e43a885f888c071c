"""Training FLOPs per target token, counted on the built model, for sweep planning and matched budgets.

The count is not a formula: the built model runs one forward pass on the meta device (no memory, no
arithmetic) under ``torch.utils.flop_counter.FlopCounterMode``, which adds up the FLOPs of every matrix
product, attention included, so a user's component is counted as it is, with no declaration. Training
costs three forward passes' worth: the backward pass computes two matrix products (the gradients of the
input and of the weight) for each one of the forward pass (Kaplan et al. 2020). Norms, softmax,
activations and the optimiser are left out (they are not matrix products).
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ablate.components.positional import Positional
from ablate.config.schema import Arch


def sequence_length(cfg: DictConfig, model: nn.Module) -> int:
    """The length FLOPs are counted at: ``data.max_len`` capped at 512, and at what the positions allow."""
    T = min(cfg.data.max_len, 512)
    for module in model.modules():
        if isinstance(module, Positional) and module.max_len is not None:
            T = min(T, module.max_len)
    return T


def count_flops(model: nn.Module, cfg: DictConfig, seq_len: int | None = None) -> float:
    """Training FLOPs (forward and backward) per target token of a model built on the meta device.

    Args:
        model: ``build_model(cfg)``, on the meta device.
        cfg: its config (architecture, special ids, lengths).
        seq_len: tokens per source and target sequence; default :func:`sequence_length`.

    Returns:
        3 x the forward pass's FLOPs (2 per multiply-accumulate) for one sequence, over its T tokens.
    """
    T = seq_len or sequence_length(cfg, model)
    ids = torch.full((1, T), max(cfg.data.pad_id, cfg.data.bos_id, cfg.data.eos_id) + 1, dtype=torch.long,
                     device="meta")
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(ids) if cfg.model.arch == Arch.decoder_only else model(ids, ids)
    return 3 * counter.get_total_flops() / T


def flops_per_token(cfg: DictConfig, seq_len: int | None = None) -> float:
    """:func:`count_flops` of the model ``cfg`` builds."""
    from ablate.model.builder import build_model  # the builder imports every component

    with torch.device("meta"):
        return count_flops(build_model(cfg), cfg, seq_len)
