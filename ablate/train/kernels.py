"""Which attention kernels a run trains with, decided once its device is known.

``trainer.attention_kernel``: ``sdpa`` (the default) hands boolean masks to ``scaled_dot_product_attention``;
``flex`` hands FlexAttention block masks to ``flex_attention`` (:mod:`ablate.components.flex`), the same attention
in exact arithmetic. Where flex cannot serve the run (an attention variant that computes its attention its own way,
attention dropout, a score bias: :meth:`ablate.components.attention.Attention.why_not_flex`; a device where torch has
no flex backward), the run trains with SDPA, and :func:`choose_attention_kernel` returns the one line saying why.
Cached decoding (validation BLEU, ``ablate evaluate``) always uses SDPA's boolean masks.

On CUDA, SDPA may not pick cuDNN's attention while a boolean mask is passed: its backward has given NaN gradients
with an ``attn_mask`` at some lengths (pytorch#196678). :func:`pin_attention_backends` turns it off for the process;
flash, memory-efficient and math stay (flash refuses a mask, so the memory-efficient kernel runs).
"""

from __future__ import annotations

import torch
from torch import nn

from ablate.components import flex
from ablate.components.attention import Attention


def why_not_flex(model: nn.Module, device: torch.device) -> str | None:
    """Why ``model`` cannot train with FlexAttention on ``device``: the first reason, one line; None when it can."""
    if not hasattr(model, "mask_form"):
        return f"{type(model).__name__} builds no block masks"
    here = flex.why_not_here(device)
    if here is not None:
        return here
    for name, module in model.named_modules():
        if isinstance(module, Attention) and (reason := module.why_not_flex()) is not None:
            return f"{name}: {reason}"
    return None


def choose_attention_kernel(model: nn.Module, kernel: str, device: torch.device) -> tuple[str, str | None]:
    """Set ``model``'s masks to the form ``kernel`` (``trainer.attention_kernel``) asks for, where it can serve the
    model on ``device``.

    Returns:
        The kernel the run trains with (``sdpa`` or ``flex``), and None, or the line saying that it trains with SDPA
        where ``flex`` was asked for, and why.
    """
    if kernel != "flex":
        return "sdpa", None
    reason = why_not_flex(model, device)
    if reason is not None:
        return "sdpa", f"trainer.attention_kernel=flex: training with SDPA instead ({reason})"
    model.mask_form = flex.block_mask
    return "flex", None


def pin_attention_backends(device: torch.device) -> bool:
    """On CUDA, keep SDPA off cuDNN's attention (NaN gradients with a boolean mask, pytorch#196678): process-wide,
    set at the start of training. Returns whether it pinned (False off CUDA: nothing to pin)."""
    if device.type != "cuda":
        return False
    torch.backends.cuda.enable_cudnn_sdp(False)
    return True
