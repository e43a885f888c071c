"""Looking into a built model: the attention weights, for inspection and plots; how many positions it can encode."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from ablate.components.attention import Attention


def too_long(model: nn.Module, length: int) -> str | None:
    """Why ``model`` cannot encode ``length`` positions (a component's stated ``max_len``: learned positions, a
    synthesizer's attention), or None."""
    for module in model.modules():
        limit = getattr(module, "max_len", None)
        if isinstance(limit, int) and limit < length:
            return f"{type(module).__name__} encodes at most {limit} positions"
    return None


@contextmanager
def attention_weights(model: nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Record every attention module's weights while the block runs.

    Example:
        >>> with attention_weights(model) as weights:
        ...     model(src_ids, tgt_ids)
        >>> weights["encoder.layers.0.self_attn"].shape  # (B, h, T_q, T_k)

    Yields:
        A dict, filled when the block exits, from module name to its last
        attention weights (B, h, T_q, T_k).
    """
    modules = {name: m for name, m in model.named_modules() if isinstance(m, Attention)}
    found: dict[str, torch.Tensor] = {}
    for m in modules.values():
        m.keep_weights = True
    try:
        yield found
    finally:
        for name, m in modules.items():
            m.keep_weights = False
            if m.weights is not None:
                found[name] = m.weights
            m.weights = None
