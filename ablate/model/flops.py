"""Training FLOPs per target token, counted on the built model, for sweep planning and matched budgets.

The count walks the built modules, each use of a module once (a layer shared across a stack counts
every time it runs): a ``nn.Linear`` costs 2 x in x out FLOPs per token; any other module adds what it
declares it does itself beyond its sub-modules, ``flops_per_token(T)`` (attention's scores and weighted
sums over T keys, a tied generator's product with the embedding matrix). So a component made of linear
layers is counted with no declaration, and one that multiplies tensors itself declares it. Training
costs three forward passes' worth: the backward pass computes two matrix products (the gradients of the
input and of the weight) for each one of the forward pass (Kaplan et al. 2020). Norms, softmax and
activations are left out. Sources and targets are both T tokens long.

:func:`measure_flops` counts the same with ``torch.utils.flop_counter.FlopCounterMode`` on a real (meta)
forward and backward pass: the reference the tests hold the walk to, for every registered component.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ablate.config.schema import Arch


def sequence_length(cfg: DictConfig, model: nn.Module) -> int:
    """The length FLOPs are counted at: ``data.max_len`` capped at 512, and at what the model's components allow
    (those that state a ``max_len``: learned positions, a synthesizer's attention)."""
    T = min(cfg.data.max_len, 512)
    for module in model.modules():
        if isinstance(getattr(module, "max_len", None), int):  # a component that encodes at most max_len positions
            T = min(T, module.max_len)
    return T


def _forward(module: nn.Module, T: int) -> float:
    own = getattr(module, "flops_per_token", None)
    total = 2.0 * module.in_features * module.out_features if isinstance(module, nn.Linear) else 0.0
    total += float(own(T)) if callable(own) else 0.0
    # Not children(): it skips a module met twice, and a shared layer runs once per place it holds.
    return total + sum(_forward(child, T) for child in module._modules.values() if child is not None)


def count_flops(model: nn.Module, cfg: DictConfig, seq_len: int | None = None) -> float:
    """Training FLOPs (forward and backward) per target token: 3 x the forward pass's, by the module walk.

    Args:
        model: ``build_model(cfg)`` (on any device; nothing runs).
        cfg: its config.
        seq_len: tokens per source and target sequence; default :func:`sequence_length`.
    """
    T = seq_len or sequence_length(cfg, model)
    return 3.0 * _forward(model, T)


def measure_flops(model: nn.Module, cfg: DictConfig, seq_len: int | None = None) -> float:
    """The same, measured: FlopCounterMode over one forward and backward pass of a batch of one on the meta
    device (2 FLOPs per multiply-accumulate), divided by T."""
    T = seq_len or sequence_length(cfg, model)
    ids = torch.full((1, T), max(cfg.data.pad_id, cfg.data.bos_id, cfg.data.eos_id) + 1, dtype=torch.long,
                     device="meta")
    counter = FlopCounterMode(display=False)
    with counter:
        logits = model(ids) if cfg.model.arch == Arch.decoder_only else model(ids, ids)
        logits.sum().backward()
    return counter.get_total_flops() / T


def flops_per_token(cfg: DictConfig, seq_len: int | None = None) -> float:
    """:func:`count_flops` of the model ``cfg`` builds."""
    from ablate.model.meta import build_on_meta

    return count_flops(build_on_meta(cfg), cfg, seq_len)
