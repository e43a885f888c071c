"""Synthesizer attention (Tay et al. 2021, "Synthesizer: Rethinking Self-Attention in Transformer Models").

Self-attention's weights are synthesized without query-key interactions, then weigh the values G(X) as usual:

- dense: each position's input x_i alone gives its logits over the key positions,
  B_i = W2 relu(W1 x_i + b1) + b2 (section 3.1), one such two-layer map per head;
- random: a learned (or, ``fixed``, frozen) matrix R (h, max_len, max_len) of logits, query positions by
  key positions, the same for every input (section 3.2).

Y = softmax(B + bias, masked) G(X). Both encode at most ``max_len`` positions: queries at positions
P .. P+T-1 take the columns 0 .. T_k-1 of their logits (T_k = P+T keys), so a longer sequence is refused.
The mask keeps its meaning (True = may attend; key padding and the decoder mask set the logits to -inf) and
the stack's positional score bias (ALiBi, T5) joins the logits; there are no queries or keys, so ``rotate``
(RoPE) and the query-dependent bias do not apply. The decoder's attention over the encoder (``cross=True``)
stays the base class's dot-product attention, as in the paper. Incremental decoding caches the values of the
earlier positions (a :class:`KVCache` whose keys are zero-width: ``k`` (B, h, P, 0), ``v`` (B, h, P, d_v)).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.attention import Attention, KVCache
from ablate.components.positional import Positional
from ablate.errors import ConfigError
from ablate.registry import register


class Synthesizer(Attention):
    """Self-attention with synthesized weights: ``logits`` (B|1, h, T, T_k) in place of Q K^T / sqrt(d_k), then
    softmax and the values G(X) = X W^V (B, h, T_k, d_v), then W^O. Cross-attention: the base class's."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, max_len: int = 256):
        if max_len <= 0:
            raise ConfigError("model.attention_args.max_len", max_len, "a positive integer (the longest sequence)")
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross)
        self.max_len = max_len  # the longest sequence self-attention can weigh
        if cross:
            return  # the decoder's attention over the encoder: the base class's W^Q, W^K, W^V
        del self.w_qkv, self.w_o  # no queries or keys; W^O is built by register_w_o, after the logits' parts
        self.w_v = nn.Linear(d_model, n_heads * d_v)  # G(X), every head's values

    def register_w_o(self) -> None:
        """W^O (h d_v -> d_model), registered after the parts a subclass builds, so that modules() lists the linear
        layers in the order they run (Fixup zeroes the last one)."""
        self.w_o = nn.Linear(self.n_heads * self.d_v, self.w_v.in_features)

    def logits(self, x: torch.Tensor, offset: int, t_k: int) -> torch.Tensor:
        """The synthesized logits (B|1, h, T, T_k) of the queries x (B, T, d_model), positions offset .. offset+T-1."""
        raise NotImplementedError

    def self_heads(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None) -> torch.Tensor:
        """softmax(B + bias, masked) G(X): heads (B, h, T, d_v); with a cache, x holds positions P .. P+T-1."""
        P, T = (cache.length if cache is not None else 0), x.size(1)
        if P + T > self.max_len:
            raise ValueError(f"sequence of length {P + T} exceeds model.attention_args.max_len={self.max_len} "
                             f"({type(self).__name__} has logits for {self.max_len} key positions)")
        v = self._heads(self.w_v(x), self.n_heads, self.d_v)  # (B, h, T, d_v)
        if cache is not None:
            _, v = cache.append(v[..., :0], v)  # zero-width keys (B, h, P+T, 0), values (B, h, P+T, d_v)
        scores = self.logits(x, P, P + T)  # (B|1, h, T, T_k)
        bias = self.positional.score_bias(T, P + T)  # (h, T, T_k) or None
        scores = scores if bias is None else scores + bias.to(scores.dtype)
        weights = self.masked_softmax(scores, mask)  # (B, h, T, T_k)
        return F.dropout(weights, self.dropout, self.training) @ v  # (B, h, T, d_v)

    def masked_softmax(self, scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """softmax over the keys the boolean mask allows (B, h, T_q, T_k), 0 elsewhere; a query that may attend to no
        key (a sliding window over padding) gets no weight, as SDPA gives it, not NaN. Kept in ``self.weights`` when
        ``keep_weights``."""
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # finite: an all-masked row stays finite
        weights = scores.softmax(dim=-1)
        weights = weights if mask is None else weights.masked_fill(~mask, 0.0)  # (B, h, T_q, T_k)
        if self.keep_weights:
            self.weights = weights.detach()
        return weights

    def weights_learn(self) -> bool:
        """Whether the synthesized weights take a gradient (a frozen R without a learned score bias does not)."""
        return True

    def flops_per_token(self, length: int) -> float:
        """Self-attention: the weights (T_q x T_k) times the values, 2 h T d_v per query (its forward counted as
        two thirds when the weights take no gradient: backward then multiplies once, not twice), plus what
        :meth:`logits_flops` declares. Cross-attention: the base class's count."""
        if self.cross:
            return super().flops_per_token(length)
        values = 2.0 * self.n_heads * length * self.d_v * (1.0 if self.weights_learn() else 2.0 / 3.0)
        return values + self.logits_flops(length)

    def logits_flops(self, length: int) -> float:
        """The logits' own products per query, beyond nn.Linear children; none here."""
        return 0.0

    def scale_values(self, gain: float) -> None:
        """DeepNorm's beta on G(X) and W^O (cross-attention: the base class's)."""
        if self.cross:
            return super().scale_values(gain)
        with torch.no_grad():
            self.w_v.weight.mul_(gain)
            self.w_o.weight.mul_(gain)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", max_len={self.max_len}"


@register("attention", "synthesizer_dense")
class DenseSynthesizer(Synthesizer):
    """Dense Synthesizer: each position's input alone gives its logits over key positions (Tay et al. 2021)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, max_len: int = 256):
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross, max_len=max_len)
        if cross:
            return
        # F(x_i) = W2 relu(W1 x_i + b1) + b2 per head: W1 (d_model -> d_k) of every head fused, a hidden layer of d_k.
        self.w_1 = nn.Linear(d_model, n_heads * d_k)
        self.w_2 = nn.Parameter(torch.empty(n_heads, d_k, max_len))  # (h, d_k, max_len)
        self.b_2 = nn.Parameter(torch.zeros(n_heads, max_len))  # (h, max_len)
        bound = math.sqrt(6.0 / (d_k + max_len))  # Xavier-uniform per head, like the linear layers
        nn.init.uniform_(self.w_2, -bound, bound)
        self.register_w_o()

    def logits(self, x: torch.Tensor, offset: int, t_k: int) -> torch.Tensor:
        hidden = F.relu(self.w_1(x)).view(x.size(0), x.size(1), self.n_heads, self.d_k)  # (B, T, h, d_k)
        synthesized = torch.einsum("bthd,hdk->bhtk", hidden, self.w_2[..., :t_k])  # (B, h, T, T_k): keys 0 .. T_k-1
        return synthesized + self.b_2[:, None, :t_k]  # (B, h, T, T_k)

    def logits_flops(self, length: int) -> float:
        """W2 of every head over the T_k = ``length`` keys present: 2 h d_k T per query."""
        return 2.0 * self.n_heads * self.d_k * length


@register("attention", "synthesizer_random")
class RandomSynthesizer(Synthesizer):
    """Random Synthesizer: learned (or fixed) logits R per head, query by key position, input-free (Tay et al. 2021)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, max_len: int = 256, fixed: bool = False):
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross, max_len=max_len)
        self.fixed = fixed
        if cross:
            return
        R = torch.empty(n_heads, max_len, max_len)  # (h, query position, key position)
        nn.init.normal_(R, std=1.0)  # the paper: "randomly initialized"; N(0, 1) here
        if fixed:  # Fixed Random: never trained, kept with the checkpoint, not counted as a parameter
            self.register_buffer("R", R)
        else:
            self.R = nn.Parameter(R)
        self.register_w_o()

    def logits(self, x: torch.Tensor, offset: int, t_k: int) -> torch.Tensor:
        return self.R[None, :, offset : offset + x.size(1), :t_k].to(x.dtype)  # (1, h, T, T_k)

    def weights_learn(self) -> bool:
        if not self.fixed:
            return True
        with torch.enable_grad():  # a learned score bias (T5's) still gives the weights a gradient
            bias = self.positional.score_bias(1, 1)
        return bias is not None and bias.requires_grad

    def extra_repr(self) -> str:
        return super().extra_repr() + f", fixed={self.fixed}"
