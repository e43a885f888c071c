"""Normalisation layers, and where they sit around each residual sub-layer (post vs pre)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ablate.registry import register


@register("norm", "layernorm")
def layer_norm(*, d_model: int, eps: float = 1e-5) -> nn.Module:
    """LayerNorm with gain and bias (Ba et al. 2016; the paper's choice)."""
    return nn.LayerNorm(d_model, eps=eps)


@register("norm", "rmsnorm")
def rms_norm(*, d_model: int, eps: float = 1e-6) -> nn.Module:
    """RMSNorm: scale by the root mean square, gain only (Zhang & Sennrich 2019)."""
    return nn.RMSNorm(d_model, eps=eps)


class Residual(nn.Module):
    """A residual connection around one sub-layer, with its norm and dropout."""

    final_norm: bool = False  # does each stack end with a norm?

    def __init__(self, *, norm: nn.Module, dropout: float):
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(dropout)


@register("norm_position", "post")
class PostNorm(Residual):
    """LayerNorm(x + Dropout(Sublayer(x))) (section 3.1 and 5.4; the paper's choice)."""

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


@register("norm_position", "pre")
class PreNorm(Residual):
    """x + Dropout(Sublayer(LayerNorm(x))), and a final norm on each stack (Xiong et al. 2020)."""

    final_norm = True

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return x + self.dropout(sublayer(self.norm(x)))
