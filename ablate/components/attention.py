"""Multi-head attention (section 3.2) with h, d_k and d_v set independently.

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, computed by
``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient
kernels where the device has them). Masks are boolean, True = may attend.

Set ``module.keep_weights = True`` (see :func:`ablate.model.inspect.attention_weights`)
to compute the softmax explicitly and keep it in ``module.weights`` for inspection.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.positional import Positional


class Attention(nn.Module):
    """The part shared by self- and cross-attention: scaled dot-product over h heads, then W^O."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, dropout: float = 0.0):
        super().__init__()
        self.n_heads, self.d_k, self.d_v = n_heads, d_k, d_v
        self.scale = 1.0 / math.sqrt(d_k)
        self.dropout = dropout  # on the attention weights; 0 in the paper
        self.w_o = nn.Linear(n_heads * d_v, d_model)
        self.keep_weights = False
        self.weights: torch.Tensor | None = None

    def _heads(self, x: torch.Tensor, d: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, d).transpose(1, 2)  # (B, T, h*d) -> (B, h, T, d)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """q (B, h, T_q, d_k), k (B, h, T_k, d_k), v (B, h, T_k, d_v), mask broadcastable to (B, h, T_q, T_k)."""
        p = self.dropout if self.training else 0.0
        if self.keep_weights:
            scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, h, T_q, T_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(dim=-1)
            self.weights = weights.detach()
            out = F.dropout(weights, p, self.training) @ v  # (B, h, T_q, d_v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, scale=self.scale)
        B, _, T, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(B, T, self.n_heads * self.d_v))  # (B, T_q, d_model)


class SelfAttention(Attention):
    """Queries, keys and values from the same sequence; one fused projection W^{QKV}."""

    def __init__(self, *, positional: Positional, **dims: int | float):
        super().__init__(**dims)
        d_model, h = dims["d_model"], self.n_heads
        self.w_qkv = nn.Linear(d_model, h * (2 * self.d_k + self.d_v))
        self.positional = positional

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, d_model), mask (B, 1, T, T) or None -> (B, T, d_model)."""
        h = self.n_heads
        q, k, v = self.w_qkv(x).split([h * self.d_k, h * self.d_k, h * self.d_v], dim=-1)
        q = self.positional.rotate(self._heads(q, self.d_k))  # (B, h, T, d_k)
        k = self.positional.rotate(self._heads(k, self.d_k))  # (B, h, T, d_k)
        return self._attend(q, k, self._heads(v, self.d_v), mask)


class CrossAttention(Attention):
    """Queries from the decoder, keys and values from the encoder output (section 3.2.3)."""

    def __init__(self, **dims: int | float):
        super().__init__(**dims)
        d_model, h = dims["d_model"], self.n_heads
        self.w_q = nn.Linear(d_model, h * self.d_k)
        self.w_kv = nn.Linear(d_model, h * (self.d_k + self.d_v))

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x (B, T, d_model), memory (B, S, d_model), mask (B, 1, 1, S) -> (B, T, d_model)."""
        k, v = self.w_kv(memory).split([self.n_heads * self.d_k, self.n_heads * self.d_v], dim=-1)
        q = self._heads(self.w_q(x), self.d_k)  # (B, h, T, d_k)
        return self._attend(q, self._heads(k, self.d_k), self._heads(v, self.d_v), mask)
