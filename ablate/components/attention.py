"""Multi-head attention (section 3.2) with h, d_k and d_v set independently.

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, computed by
``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient
kernels where the device has them). Masks are boolean, True = may attend.

Incremental decoding passes a :class:`KVCache` to each attention module: self-attention
appends the keys and values of the new positions to it, cross-attention reads the keys and
values of the encoder output from it (computed once per sentence by :meth:`CrossAttention.project`).

Set ``module.keep_weights = True`` (see :func:`ablate.model.inspect.attention_weights`)
to compute the softmax explicitly and keep it in ``module.weights`` for inspection.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.positional import Positional


class KVCache:
    """Keys (B, h, T, d_k) and values (B, h, T, d_v) that an attention module keeps between decoding steps."""

    def __init__(self, k: torch.Tensor | None = None, v: torch.Tensor | None = None):
        self.k, self.v = k, v

    @property
    def length(self) -> int:
        """T: the number of positions held."""
        return 0 if self.k is None else self.k.size(2)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the keys (B, h, t, d_k) and values (B, h, t, d_v) of t new positions; returns all of them."""
        if self.k is not None:
            k, v = torch.cat((self.k, k), dim=2), torch.cat((self.v, v), dim=2)  # (B, h, T + t, d)
        self.k, self.v = k, v
        return k, v

    def select(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (B',) of the batch, in that order: beams reordered, finished sentences dropped."""
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)  # (B', h, T, d)


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None = None) -> torch.Tensor:
        """x (B, T, d_model), mask (B, 1, T, T) or None -> (B, T, d_model).

        With a ``cache`` holding P earlier positions, ``x`` holds positions P .. P+T-1, the mask is
        (B, 1, T, P+T), and the new keys and values join the cache.
        """
        h, offset = self.n_heads, cache.length if cache is not None else 0
        q, k, v = self.w_qkv(x).split([h * self.d_k, h * self.d_k, h * self.d_v], dim=-1)
        q = self.positional.rotate(self._heads(q, self.d_k), offset)  # (B, h, T, d_k)
        k = self.positional.rotate(self._heads(k, self.d_k), offset)  # (B, h, T, d_k)
        v = self._heads(v, self.d_v)  # (B, h, T, d_v)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, P+T, d_k), (B, h, P+T, d_v)
        return self._attend(q, k, v, mask)


class CrossAttention(Attention):
    """Queries from the decoder, keys and values from the encoder output (section 3.2.3)."""

    def __init__(self, **dims: int | float):
        super().__init__(**dims)
        d_model, h = dims["d_model"], self.n_heads
        self.w_q = nn.Linear(d_model, h * self.d_k)
        self.w_kv = nn.Linear(d_model, h * (self.d_k + self.d_v))

    def project(self, memory: torch.Tensor) -> KVCache:
        """Keys (B, h, S, d_k) and values (B, h, S, d_v) of the encoder output memory (B, S, d_model)."""
        k, v = self.w_kv(memory).split([self.n_heads * self.d_k, self.n_heads * self.d_v], dim=-1)
        return KVCache(self._heads(k, self.d_k), self._heads(v, self.d_v))

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor | None, mask: torch.Tensor | None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """x (B, T, d_model), memory (B, S, d_model), mask (B, 1, 1, S) -> (B, T, d_model).

        With a ``cache`` from :meth:`project`, memory's keys and values are not computed again (memory may be None).
        """
        kv = cache if cache is not None else self.project(memory)
        q = self._heads(self.w_q(x), self.d_k)  # (B, h, T, d_k)
        return self._attend(q, kv.k, kv.v, mask)
