"""Attention whose heads interact: talking heads, gated heads, differential heads.

Each keeps multi-head attention's projections and changes one step of :class:`Attention`:

- talking heads (Shazeer et al. 2020) mix the heads' logits before the softmax and their weights after it,
  with learned h x h matrices P_l and P_w (:meth:`attend`);
- gated attention (Qiu et al. 2025) multiplies each head's output elementwise by a sigmoid of the layer's
  input, Y' = Y * sigmoid(x W_theta), before W^O (:meth:`output`);
- differential attention (Ye et al. 2024) subtracts two softmax maps per head, (A_1 - lambda A_2) V, then
  normalises each head (:meth:`attend`).

All three serve both roles (self-attention and the decoder's attention over the encoder), keep the boolean
mask (True = may attend), the stack's positional component (rotated queries and keys, score biases) and
the cache: what they change acts on one query at a time, so cached decoding equals the full pass.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.attention import Attention, with_bias
from ablate.components.positional import Positional
from ablate.errors import ConfigError
from ablate.registry import register


def _truncated_normal(p: torch.Tensor) -> None:
    """N(0, 1/h) truncated at 2 standard deviations: Mesh TensorFlow's fan-in variance scaling, which the paper's
    talking-heads projections were initialised with."""
    std = p.size(0) ** -0.5
    nn.init.trunc_normal_(p, std=std, a=-2 * std, b=2 * std)


TALKING_HEADS_INIT = {"random": _truncated_normal, "identity": nn.init.eye_}


@register("attention", "talking_heads")
class TalkingHeadsAttention(Attention):
    """Heads mixed by learned h x h projections of the logits before the softmax and of the weights after it
    (Shazeer et al. 2020)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, init: str = "random"):
        """Builds P_l and P_w besides :class:`Attention`'s projections.

        Args:
            init: ``"random"`` (the paper's: N(0, 1/h), truncated, as Mesh TensorFlow's projections) or
                ``"identity"`` (P_l = P_w = I: the model starts as plain multi-head attention).

        Raises:
            ConfigError: an unknown ``init``.
        """
        if init not in TALKING_HEADS_INIT:
            raise ConfigError("model.attention_args.init", init,
                              "'random' (the paper's) or 'identity' (starts as multi-head attention)")
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross)
        self.init = init
        self.p_l = nn.Parameter(torch.empty(n_heads, n_heads))  # P_l (h, h'): logits of head i feed head j
        self.p_w = nn.Parameter(torch.empty(n_heads, n_heads))  # P_w (h', h): weights of head i feed head j
        for p in (self.p_l, self.p_w):
            TALKING_HEADS_INIT[init](p)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               bias: torch.Tensor | None) -> torch.Tensor:
        """J = q k^T / sqrt(d_k), L = J P_l over the heads, W = softmax(L + bias, masked), U = W P_w over the heads,
        heads = dropout(U) V. The mask and the score bias act on the mixed logits, as in Mesh TensorFlow.

        ``keep_weights`` keeps W, the softmax before P_w.
        """
        scores = q @ k.transpose(-2, -1) * self.scale  # J (B, h, T_q, T_k)
        logits = torch.einsum("bhqk,hg->bgqk", scores, self.p_l)  # L (B, h, T_q, T_k)
        if mask is not None:
            # A query that may attend to no key (padding under a sliding window) gets zero weights, as SDPA gives
            # it: its row is softmaxed unmasked, so that neither it nor its gradient is NaN, then zeroed.
            no_key = ~mask.any(-1, keepdim=True)  # (B, 1, T_q, 1)
            weights = self.softmax_weights(logits, with_bias(mask | no_key, bias, q.dtype))  # W (B, h, T_q, T_k)
            weights = weights.masked_fill(no_key, 0.0)
        else:
            weights = self.softmax_weights(logits, with_bias(None, bias, q.dtype))  # W (B, h, T_q, T_k)
        weights = torch.einsum("bhqk,hg->bgqk", weights, self.p_w)  # U (B, h, T_q, T_k)
        return F.dropout(weights, self.dropout, self.training) @ v  # (B, h, T_q, d_v)

    def flops_per_token(self, length: int) -> float:
        """Multi-head attention's, plus the two mixings of the (h, T_k) maps of each query: 2 h^2 T_k each."""
        return super().flops_per_token(length) + 2 * (2.0 * self.n_heads * self.n_heads * length)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", init={self.init}"


@register("attention", "gated")
class GatedAttention(Attention):
    """Each head's output gated elementwise by sigmoid(x W_theta) before W^O
    (Qiu et al. 2025, Gated Attention for LLMs)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False):
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross)
        # W_theta: d_model -> h d_v, a gate per head and channel (the paper's head-specific elementwise gate). It has
        # a bias like every projection here; the builder initialises it as them (Xavier weight, zero bias: gate 1/2).
        self.w_theta = nn.Linear(d_model, n_heads * d_v)

    def output(self, heads: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Y' = Y * sigmoid(x W_theta), then W^O: heads Y (B, h, T, d_v), x (B, T, d_model) the layer's input (the
        decoder's queries for cross-attention) -> (B, T, d_model)."""
        B, _, T, _ = heads.shape
        y = heads.transpose(1, 2).reshape(B, T, self.n_heads * self.d_v)  # (B, T, h*d_v)
        gate = torch.sigmoid(self.w_theta(x))  # (B, T, h*d_v)
        return self.w_o(y * gate)  # (B, T, d_model)


def lambda_init(layer: int) -> float:
    """lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for the paper's layer l in [1, L], i.e. ``layer`` = l - 1 from 0."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer)


@register("attention", "differential")
class DifferentialAttention(Attention):
    """Two softmax maps per head subtracted, (A1 - lambda A2) V, each head RMS-normalised
    (Ye et al. 2024, Differential Transformer)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, layer: int = 0):
        """Builds the lambda vectors and the per-head norm besides :class:`Attention`'s projections.

        Args:
            layer: the layer's index from 0 in its stack (the paper's l - 1), which sets lambda_init.

        Raises:
            ConfigError: an odd ``model.d_k`` (each head's queries and keys are split in two halves).
        """
        if d_k % 2:
            raise ConfigError("model.d_k", d_k, "an even number for attention=differential (two halves per head)")
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross)
        half = d_k // 2
        self.scale = 1.0 / math.sqrt(half)  # each map's dot products are over d_k/2 (also scales a query bias)
        self.lambda_init = lambda_init(layer)
        # lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init; one per layer, shared by
        # the heads, N(0, 0.1^2) as in the authors' code.
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (nn.Parameter(torch.empty(half))
                                                                          for _ in range(4))
        for p in (self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2):
            nn.init.normal_(p, std=0.1)
        self.head_norm = nn.RMSNorm(d_v, eps=1e-5)  # over each head's d_v (the paper's GroupNorm), gain shared

    def reparameterized_lambda(self) -> torch.Tensor:
        """lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init, a scalar."""
        first = torch.exp((self.lambda_q1 * self.lambda_k1).sum())
        second = torch.exp((self.lambda_q2 * self.lambda_k2).sum())
        return first - second + self.lambda_init

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               bias: torch.Tensor | None) -> torch.Tensor:
        """DiffAttn = (softmax(Q1 K1^T / sqrt(d_k/2)) - lambda softmax(Q2 K2^T / sqrt(d_k/2))) V, then
        (1 - lambda_init) RMSNorm per head.

        Q1 and Q2 are each head's even and odd dimensions (likewise K1, K2): RoPE rotates pairs (i, i + d_k/2),
        which then lie within one half when d_k/2 is even, so each map keeps RoPE's relative positions (and Q1
        sees RoPE's frequencies at d_k/2; partial_rope's pairs (i, i + rotary/2) likewise when rotary/2 is even).
        With d_k/2 odd, every split splits some pair and the maps see some absolute position. Two SDPA calls;
        attention dropout acts on each map (the authors' code drops out their difference; the same at
        attention_dropout=0). ``keep_weights`` keeps A1 - lambda A2. The score bias (ALiBi, T5, Shaw) is added
        to both maps.
        """
        q1, q2 = q[..., 0::2], q[..., 1::2]  # (B, h, T_q, d_k/2) each
        k1, k2 = k[..., 0::2], k[..., 1::2]  # (B, h, T_k, d_k/2) each
        lam = self.reparameterized_lambda()
        mask = with_bias(mask, bias, q.dtype)
        if self.keep_weights:
            weights = (self.softmax_weights(q1 @ k1.transpose(-2, -1) * self.scale, mask)
                       - lam * self.softmax_weights(q2 @ k2.transpose(-2, -1) * self.scale, mask))  # (B, h, T_q, T_k)
            self.weights = weights.detach()
            heads = F.dropout(weights, self.dropout, self.training) @ v  # (B, h, T_q, d_v)
        else:
            p = self.dropout if self.training else 0.0
            a1 = F.scaled_dot_product_attention(q1, k1, v, attn_mask=mask, dropout_p=p, scale=self.scale)
            a2 = F.scaled_dot_product_attention(q2, k2, v, attn_mask=mask, dropout_p=p, scale=self.scale)
            heads = a1 - lam * a2  # (B, h, T_q, d_v)
        return self.head_norm(heads) * (1.0 - self.lambda_init)  # (B, h, T_q, d_v)

    def flops_per_token(self, length: int) -> float:
        """Two maps per head: two Q K^T over d_k/2 and two weighted sums of the values, over ``length`` keys."""
        return 2 * (2.0 * self.n_heads * length * (self.d_k // 2 + self.d_v))

    def extra_repr(self) -> str:
        return super().extra_repr() + f", lambda_init={self.lambda_init:.4f}"
