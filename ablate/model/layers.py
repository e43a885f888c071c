"""Encoder and decoder layers (section 3.1). Each receives its built parts; forwards are residual lines."""

from __future__ import annotations

import torch
from torch import nn

from ablate.components.attention import CrossAttention, SelfAttention
from ablate.components.norm import Residual


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each inside a residual connection."""

    def __init__(self, *, self_attn: SelfAttention, ffn: nn.Module, res_attn: Residual, res_ffn: Residual):
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn
        self.res_attn, self.res_ffn = res_attn, res_ffn

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, d_model), mask (B, 1, T, T) -> (B, T, d_model)."""
        x = self.res_attn(x, lambda h: self.self_attn(h, mask))
        return self.res_ffn(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then feed-forward."""

    def __init__(
        self,
        *,
        self_attn: SelfAttention,
        cross_attn: CrossAttention,
        ffn: nn.Module,
        res_attn: Residual,
        res_cross: Residual,
        res_ffn: Residual,
    ):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        self.res_attn, self.res_cross, self.res_ffn = res_attn, res_cross, res_ffn

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None, cross_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """x (B, T, d_model), memory (B, S, d_model), self_mask (B, 1, T, T), cross_mask (B, 1, 1, S)."""
        x = self.res_attn(x, lambda h: self.self_attn(h, self_mask))
        x = self.res_cross(x, lambda h: self.cross_attn(h, memory, cross_mask))
        return self.res_ffn(x, self.ffn)


class Stack(nn.Module):
    """N identical layers and, for pre-norm, a final norm."""

    def __init__(self, layers: list[nn.Module], final_norm: nn.Module):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, x: torch.Tensor, *args: torch.Tensor | None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, *args)
        return self.final_norm(x)
