"""Decoder self-attention masks. Convention, used everywhere: a boolean mask, True = may attend.

A mask is called with the number of queries and keys and returns a (T_q, T_k)
boolean tensor, or ``None`` when every key may be attended to. Queries are the
*last* T_q positions of the T_k keys, so the same mask serves full sequences
(T_q == T_k) and incremental decoding (T_q == 1). The key-padding mask is
separate and always applied by the model.
"""

from __future__ import annotations

import torch

from ablate.errors import ConfigError
from ablate.registry import register


def _positions(t_q: int, t_k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(t_k - t_q, t_k, device=device).unsqueeze(1)  # (T_q, 1) query positions
    j = torch.arange(t_k, device=device).unsqueeze(0)  # (1, T_k) key positions
    return i, j


@register("mask", "causal")
class CausalMask:
    """Position i attends to positions j <= i (section 3.2.3; the paper's decoder)."""

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        i, j = _positions(t_q, t_k, device)
        return j <= i  # (T_q, T_k)


@register("mask", "none")
class NoMask:
    """No look-ahead mask: the decoder sees future tokens (the leak the causal mask prevents)."""

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        return None


@register("mask", "sliding_window")
class SlidingWindowMask:
    """Causal, limited to the last `window` positions: i - window < j <= i."""

    def __init__(self, *, window: int = 64):
        if window <= 0:
            raise ConfigError("model.mask_args.window", window, "a positive integer")
        self.window = window

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        i, j = _positions(t_q, t_k, device)
        return (j <= i) & (j > i - self.window)  # (T_q, T_k)


@register("mask", "prefix_lm")
class PrefixLMMask:
    """Bidirectional over the first `prefix_len` positions, causal after (Raffel et al. 2020)."""

    def __init__(self, *, prefix_len: int = 16):
        if prefix_len < 0:
            raise ConfigError("model.mask_args.prefix_len", prefix_len, "a non-negative integer")
        self.prefix_len = prefix_len

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        i, j = _positions(t_q, t_k, device)
        return (j <= i) | (j < self.prefix_len)  # (T_q, T_k)
