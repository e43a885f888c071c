"""Encoder and decoder layers (section 3.1). Each receives its built parts; forwards are residual lines.

For incremental decoding, each layer takes its cache: a :class:`KVCache` for a self-attention-only
layer, a :class:`DecoderLayerCache` for a decoder layer. Without one, a forward sees the whole sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ablate.components.attention import Attention, KVCache
from ablate.components.residual import Residual
from ablate.components.sharing import Stack  # noqa: F401  (the stack of layers: ablate.components.sharing)


@dataclass
class DecoderLayerCache:
    """One decoder layer's keys and values between decoding steps."""

    self_attn: KVCache  # the target positions decoded so far: grows by one position a step
    cross_attn: KVCache  # the encoder output: computed once per sentence

    def select(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (B',) of the batch, in that order."""
        self.self_attn.select(index)
        self.cross_attn.select(index)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each inside a residual connection (also a decoder-only model's layer)."""

    def __init__(self, *, self_attn: Attention, ffn: nn.Module, res_attn: Residual, res_ffn: Residual):
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn
        self.res_attn, self.res_ffn = res_attn, res_ffn

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None = None) -> torch.Tensor:
        """x (B, T, d_model), mask (B, 1, T, T) -> (B, T, d_model). With a cache, x and mask as in Attention."""
        x = self.res_attn(x, lambda h: self.self_attn(h, mask, cache))
        return self.res_ffn(x, self.ffn)

    def residuals(self) -> list[tuple[Residual, nn.Module]]:
        """Each residual connection with the sub-layer it wraps."""
        return [(self.res_attn, self.self_attn), (self.res_ffn, self.ffn)]


class DecoderLayer(nn.Module):
    """Masked self-attention, attention over the encoder output, then feed-forward."""

    def __init__(self, *, self_attn: Attention, cross_attn: Attention, ffn: nn.Module, res_attn: Residual,
                 res_cross: Residual, res_ffn: Residual):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        self.res_attn, self.res_cross, self.res_ffn = res_attn, res_cross, res_ffn

    def start(self, memory: torch.Tensor) -> DecoderLayerCache:
        """An empty self-attention cache and the cross-attention keys and values of memory (B, S, d_model)."""
        return DecoderLayerCache(self_attn=KVCache(), cross_attn=self.cross_attn.project_memory(memory))

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None, self_mask: torch.Tensor | None,
                cross_mask: torch.Tensor | None, cache: DecoderLayerCache | None = None) -> torch.Tensor:
        """x (B, T, d_model), memory (B, S, d_model), self_mask (B, 1, T, T), cross_mask (B, 1, 1, S).

        With a cache (from :meth:`start`) holding P positions: x holds the next T, self_mask is
        (B, 1, T, P+T), and memory is not needed.
        """
        self_kv, memory_kv = (cache.self_attn, cache.cross_attn) if cache is not None else (None, None)
        x = self.res_attn(x, lambda h: self.self_attn(h, self_mask, self_kv))
        x = self.res_cross(x, lambda h: self.cross_attn(h, cross_mask, memory_kv, memory=memory))
        return self.res_ffn(x, self.ffn)

    def residuals(self) -> list[tuple[Residual, nn.Module]]:
        """Each residual connection with the sub-layer it wraps."""
        return [(self.res_attn, self.self_attn), (self.res_cross, self.cross_attn), (self.res_ffn, self.ffn)]
