"""Position-wise feed-forward networks (section 3.3) and their gated successors."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ablate.registry import register


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, applied to each position separately."""

    def __init__(self, *, d_model: int, d_ff: int, activation: nn.Module, bias: bool = True):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.activation(self.w_1(x)))  # (B, T, d) -> (B, T, d_ff) -> (B, T, d)


@register("ffn", "relu")
def relu_ffn(*, d_model: int, d_ff: int, bias: bool = True) -> FeedForward:
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (section 3.3, equation 2; the paper's choice)."""
    return FeedForward(d_model=d_model, d_ff=d_ff, activation=nn.ReLU(), bias=bias)


@register("ffn", "gelu")
def gelu_ffn(*, d_model: int, d_ff: int, bias: bool = True) -> FeedForward:
    """FFN with GELU in place of ReLU (Hendrycks & Gimpel 2016; BERT, GPT-2)."""
    return FeedForward(d_model=d_model, d_ff=d_ff, activation=nn.GELU(), bias=bias)


@register("ffn", "swiglu")
class SwiGLU(nn.Module):
    """FFN_SwiGLU(x) = (Swish(x W) * x V) W2 (Shazeer 2020); three d_model x d_ff matrices."""

    def __init__(self, *, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(F.silu(self.w_gate(x)) * self.w_up(x))  # (B, T, d_ff) gated -> (B, T, d)
