"""Attention (section 3.2): the paper's multi-head attention and its successors, one kind of component.

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + B) V, computed by
``torch.nn.functional.scaled_dot_product_attention`` (flash / memory-efficient kernels where the
device has them), with h, d_k and d_v set independently and B the positional component's score bias
(none for the paper's). Masks are boolean, True = may attend; a bias joins them as a float mask.

Each variant builds both roles: self-attention (``cross=False``: queries, keys and values from one
sequence, through one fused projection, with the stack's positional component applied) and the
decoder's attention over the encoder output (``cross=True``). Incremental decoding passes a
:class:`KVCache`: self-attention appends the new positions' keys and values to it; cross-attention
reads the encoder output's, computed once per sentence by :meth:`Attention.project_memory`.

The mask may also be a FlexAttention block mask (``trainer.attention_kernel: flex``, :mod:`ablate.components.flex`):
the same attention, computed by flex's kernel; :meth:`Attention.why_not_flex` says when a module cannot be served so.

Set ``module.keep_weights = True`` (see :func:`ablate.model.inspect.attention_weights`) to compute
the softmax explicitly and keep it in ``module.weights`` for inspection.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components import flex
from ablate.components.positional import Positional
from ablate.errors import ConfigError
from ablate.registry import declare_kind, register


class KVCache:
    """Keys (B, h_kv, T, d_k) and values (B, h_kv, T, d_v) that an attention module keeps between decoding steps."""

    def __init__(self, k: torch.Tensor | None = None, v: torch.Tensor | None = None):
        self.k, self.v = k, v

    @property
    def length(self) -> int:
        """T: the number of positions held."""
        return 0 if self.k is None else self.k.size(2)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the keys (B, h_kv, t, d_k) and values (B, h_kv, t, d_v) of t new positions; returns all of them."""
        if self.k is not None:
            k, v = torch.cat((self.k, k), dim=2), torch.cat((self.v, v), dim=2)  # (B, h_kv, T + t, d)
        self.k, self.v = k, v
        return k, v

    def select(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (B',) of the batch, in that order: beams reordered, finished sentences dropped."""
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)  # (B', h_kv, T, d)


def with_bias(mask: torch.Tensor | None, bias: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A boolean mask (True = may attend) and a float score bias as one float mask: the bias where attending is
    allowed, -inf elsewhere; the mask alone without a bias."""
    if bias is None:
        return mask
    bias = bias.to(dtype)
    return bias if mask is None else bias.masked_fill(~mask, float("-inf"))  # (B, h, T_q, T_k)


# The steps between the projections and W^O: a variant that overrides one computes its attention its own way, which
# a block mask may not reach (a synthesizer's, a convolution's); it trains with SDPA (why_not_flex).
FLEX_STEPS = ("self_heads", "cross_heads", "attend", "softmax_weights", "position_bias")


class Attention(nn.Module):
    """Multi-head attention: h query heads over h_kv key/value heads (h_kv = h here), then W^O.

    Subclasses change ``n_kv_heads`` or override a step: :meth:`normalize_q` / :meth:`normalize_k` (per head),
    :meth:`attend` (scores to heads), :meth:`output` (heads to d_model), :meth:`self_heads` (what replaces
    self-attention: a synthesizer, a convolution), :meth:`cross_heads` and :meth:`project_memory`.
    """

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, n_kv_heads: int | None = None):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_k, self.d_v = n_heads, n_kv_heads or n_heads, d_k, d_v
        self.scale = 1.0 / math.sqrt(d_k)
        self.dropout = attention_dropout  # on the attention weights; 0 in the paper
        self.cross = cross
        # The stack's positional component (shared by its layers); cross-attention has no position information.
        self.positional = None if cross else (positional if positional is not None else Positional())
        kv = self.n_kv_heads * (d_k + d_v)
        if cross:
            self.w_q = nn.Linear(d_model, n_heads * d_k)
            self.w_kv = nn.Linear(d_model, kv)
        else:
            self.w_qkv = nn.Linear(d_model, n_heads * d_k + kv)  # W^Q, W^K, W^V of every head, fused
        self.w_o = nn.Linear(n_heads * d_v, d_model)
        self.keep_weights = False
        self.weights: torch.Tensor | None = None

    def _heads(self, x: torch.Tensor, h: int, d: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, h, d).transpose(1, 2)  # (B, T, h*d) -> (B, h, T, d)

    def normalize_q(self, q: torch.Tensor) -> torch.Tensor:
        """Queries (B, h, T, d_k) before the dot product; the identity here."""
        return q

    def normalize_k(self, k: torch.Tensor) -> torch.Tensor:
        """Keys (B, h_kv, T, d_k) before the dot product; the identity here."""
        return k

    def project_memory(self, memory: torch.Tensor) -> KVCache:
        """Cross-attention: keys (B, h_kv, S, d_k) and values (B, h_kv, S, d_v) of the encoder output
        (B, S, d_model)."""
        hk = self.n_kv_heads * self.d_k
        k, v = self.w_kv(memory).split([hk, self.n_kv_heads * self.d_v], dim=-1)
        return KVCache(self.normalize_k(self._heads(k, self.n_kv_heads, self.d_k)),
                       self._heads(v, self.n_kv_heads, self.d_v))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None = None,
                memory: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, d_model), mask broadcastable to (B, h, T, T_k) -> (B, T, d_model).

        Self-attention: with a ``cache`` holding P earlier positions, ``x`` holds positions P .. P+T-1,
        the mask is (B, 1, T, P+T), and the new keys and values join the cache. Cross-attention:
        keys and values of ``memory`` (B, S, d_model), or of a ``cache`` from :meth:`project_memory`.
        """
        heads = self.cross_heads(x, mask, cache, memory) if self.cross else self.self_heads(x, mask, cache)
        return self.output(heads, x)  # (B, h, T, d_v) -> (B, T, d_model)

    def self_heads(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None) -> torch.Tensor:
        """Self-attention's heads (B, h, T, d_v) of x (B, T, d_model): one fused projection to queries, keys
        and values, the stack's positions applied (rotated queries and keys, a score bias)."""
        offset = cache.length if cache is not None else 0
        hq, hk = self.n_heads * self.d_k, self.n_kv_heads * self.d_k
        q, k, v = self.w_qkv(x).split([hq, hk, self.n_kv_heads * self.d_v], dim=-1)
        q = self.positional.rotate(self.normalize_q(self._heads(q, self.n_heads, self.d_k)), offset)  # (B, h, T, d_k)
        k = self.normalize_k(self._heads(k, self.n_kv_heads, self.d_k))
        k = self.positional.rotate(k, offset)  # (B, h_kv, T, d_k)
        v = self._heads(v, self.n_kv_heads, self.d_v)  # (B, h_kv, T, d_v)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h_kv, P+T, d_k), (B, h_kv, P+T, d_v)
        return self.attend(q, k, v, mask, self.position_bias(q, k.size(2)))

    def cross_heads(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None,
                    memory: torch.Tensor | None) -> torch.Tensor:
        """The decoder's attention over the encoder output: heads (B, h, T, d_v), no position information."""
        kv = cache if cache is not None else self.project_memory(memory)
        q = self.normalize_q(self._heads(self.w_q(x), self.n_heads, self.d_k))  # (B, h, T, d_k)
        return self.attend(q, kv.k, kv.v, mask, None)

    def position_bias(self, q: torch.Tensor, t_k: int) -> torch.Tensor | None:
        """The positional component's score bias (h, T_q, T_k) plus its query-dependent one (B, h, T_q, T_k), scaled
        like the scores; None when it has neither."""
        bias = self.positional.score_bias(q.size(2), t_k)
        by_query = self.positional.query_bias(q, t_k)
        if by_query is None:
            return bias
        by_query = by_query * self.scale
        return by_query if bias is None else bias + by_query

    def output(self, heads: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """W^O over the concatenated heads (B, h, T, d_v) -> (B, T, d_model); ``x`` (B, T, d_model) is the layer's
        input, for variants that gate the heads with it."""
        B, _, T, _ = heads.shape
        return self.w_o(heads.transpose(1, 2).reshape(B, T, self.n_heads * self.d_v))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               bias: torch.Tensor | None) -> torch.Tensor:
        """q (B, h, T_q, d_k), k (B, h_kv, T_k, d_k), v (B, h_kv, T_k, d_v), mask (B, 1, T_q|1, T_k) or a block mask,
        bias (h | B, h, T_q, T_k) -> the heads (B, h, T_q, d_v)."""
        if self.n_kv_heads != self.n_heads:  # each key/value head serves h / h_kv query heads
            group = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, h, T_k, d)
        if isinstance(mask, flex.BlockMask) and not self.keep_weights:  # no bias, no dropout: why_not_flex
            return flex.attend(q, k, v, mask, self.scale)  # (B, h, T_q, d_v)
        mask = with_bias(flex.dense(mask), bias, q.dtype)
        p = self.dropout if self.training else 0.0
        if self.keep_weights:
            weights = self.softmax_weights(q @ k.transpose(-2, -1) * self.scale, mask)  # (B, h, T_q, T_k)
            return F.dropout(weights, p, self.training) @ v  # (B, h, T_q, d_v)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, scale=self.scale)

    def softmax_weights(self, scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """softmax(scores + mask) over the keys (B, h, T_q, T_k), kept in ``self.weights`` when ``keep_weights``."""
        if mask is not None:
            scores = scores + mask if mask.is_floating_point() else scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        if self.keep_weights:
            self.weights = weights.detach()
        return weights

    def why_not_flex(self) -> str | None:
        """Why FlexAttention cannot compute this module's attention as :meth:`attend` does; None when it can: it has
        no attention dropout, no score bias, and computes its attention with this class's steps."""
        if self.dropout > 0:
            return f"attention dropout {self.dropout} (flex applies none)"
        if self.positional is not None and self.positional.biases_scores:
            return f"{type(self.positional).__name__} adds a bias to the attention scores"
        own = [step for step in FLEX_STEPS if getattr(type(self), step) is not getattr(Attention, step)]
        if own:
            return f"{type(self).__name__} computes its attention its own way ({own[0]})"
        return None

    def flops_per_token(self, length: int) -> float:
        """Per query, beyond the projections: Q K^T over ``length`` keys (d_k each) and the weighted sum of
        the values (d_v each), in every head."""
        return 2.0 * self.n_heads * length * (self.d_k + self.d_v)

    def scale_values(self, gain: float) -> None:
        """Multiply the value and output projections by ``gain`` (DeepNorm's beta; queries and keys keep theirs)."""
        values = self.w_kv if self.cross else self.w_qkv
        n_v = self.n_kv_heads * self.d_v
        with torch.no_grad():
            values.weight[-n_v:].mul_(gain)  # the V rows come last
            self.w_o.weight.mul_(gain)

    def extra_repr(self) -> str:
        return (f"n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, d_k={self.d_k}, d_v={self.d_v}, "
                f"cross={self.cross}, dropout={self.dropout}")


KIND = declare_kind("attention", key="model.attention", interface=Attention, default="mha",
                    description="attention over h heads: self-attention in every layer, "
                                "and the decoder's over the encoder")


@register("attention", "mha")
class MultiHeadAttention(Attention):
    """Multi-head scaled dot-product attention, h heads of d_k / d_v (Vaswani et al. 2017, section 3.2; the paper's)."""


@register("attention", "gqa")
class GroupedQueryAttention(Attention):
    """h query heads share n_kv_heads key/value heads; n_kv_heads=1 is multi-query
    (Ainslie et al. 2023; Shazeer 2019)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, n_kv_heads: int = 1):
        if not 1 <= n_kv_heads <= n_heads or n_heads % n_kv_heads:
            raise ConfigError("model.attention_args.n_kv_heads", n_kv_heads,
                              f"a divisor of model.n_heads={n_heads} (1 = multi-query)")
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross, n_kv_heads=n_kv_heads)


@register("attention", "qk_norm")
class QKNormAttention(Attention):
    """Queries and keys layer-normalised per head before the dot product (Dehghani et al. 2023; Henry et al. 2020)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, eps: float = 1e-6):
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross)
        self.q_norm, self.k_norm = nn.LayerNorm(d_k, eps=eps), nn.LayerNorm(d_k, eps=eps)

    def normalize_q(self, q: torch.Tensor) -> torch.Tensor:
        return self.q_norm(q)

    def normalize_k(self, k: torch.Tensor) -> torch.Tensor:
        return self.k_norm(k)
