"""Lightweight and dynamic convolutions in place of self-attention (Wu et al. 2019, "Pay Less Attention with
Lightweight and Dynamic Convolutions").

The block (section 4): an input projection d_model -> 2 d_model and a GLU give u (B, T, d_model); a depthwise
convolution mixes each channel over K positions, its d_model channels in H = n_heads groups of d_model / H that
share one kernel of width K, softmax-normalised over its taps (DropConnect on them, ``weight_dropout``); an output
projection W^O (d_model -> d_model) follows. LightConv learns one kernel per group; DynamicConv predicts each
position's kernels from its own u_i, a linear map d_model -> H x K (section 3).

The kernel is causal in the decoder stack (a decoder-only model's too), taps i-K+1 .. i, and centred in the
encoder, taps i-K//2 .. i+K//2 (K odd). The convolution gathers the K taps of every query position (indices
clamped to the sequence) and weighs them with one einsum: static shapes. A tap outside the sequence, or whose key
the mask forbids (key padding, the decoder mask), contributes 0, as the paper's zero padding does; the kernel is
not renormalised. A mask that looks ahead (``none``, ``prefix_lm``) lets a decoder position see no more than its
K-1 predecessors. The stack's positional score bias (ALiBi, T5), taken at each tap's key, joins the kernel's
logits before the softmax; there are no queries or keys, so ``rotate`` and the query-dependent bias do not apply.

Self-attention's heads are the H groups, (B, H, T, d_model / H), and W^O maps d_model -> d_model: ``d_k`` and
``d_v`` are not used by it. The decoder's attention over the encoder (``cross=True``) stays the base class's
dot-product attention, as in the paper. Incremental decoding caches the GLU outputs u of the earlier positions
(a :class:`KVCache` with zero-width keys, ``v`` (B, H, P, d_model / H)); each step reads the last K-1 of them.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.attention import Attention, KVCache
from ablate.components.positional import Positional
from ablate.errors import ConfigError
from ablate.registry import register


def taps(t_q: int, t_k: int, first: int, K: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Key positions (T_q, K) of each query's taps, queries being the last T_q of T_k positions and tap t at offset
    first + t, clamped into 0 .. T_k-1; and (T_q, K) boolean, True where the tap lies inside the sequence."""
    j = torch.arange(t_k - t_q, t_k, device=device)[:, None] + torch.arange(first, first + K, device=device)  # (T_q, K)
    return j.clamp(0, t_k - 1), (j >= 0) & (j < t_k)


def at_taps(scores: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """scores (..., T_q|1, T_k) -> their values at the taps j (T_q, K): (..., T_q, K)."""
    scores = scores.expand(*scores.shape[:-2], j.size(0), scores.size(-1))  # (..., T_q, T_k)
    return scores.gather(-1, j.expand(*scores.shape[:-1], j.size(1)))  # (..., T_q, K)


class Convolution(Attention):
    """Self-attention replaced by a GLU and a convolution over K positions per group of channels, then W^O
    (d_model -> d_model). Subclasses give the kernel's logits (:meth:`kernel_logits`). Cross-attention: the base
    class's."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, stack: str, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, kernel_size: int = 7,
                 weight_dropout: float = 0.0):
        causal = stack == "decoder"
        if kernel_size < 1 or not (causal or kernel_size % 2):
            raise ConfigError("model.attention_args.kernel_size", kernel_size,
                              "a positive integer, odd when there is an encoder (its kernel is centred)")
        if not 0.0 <= weight_dropout < 1.0:
            raise ConfigError("model.attention_args.weight_dropout", weight_dropout, "a probability in [0, 1)")
        if d_model % n_heads:
            raise ConfigError("model.n_heads", n_heads, f"a divisor of model.d_model={d_model} (the kernels' groups)")
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross)
        self.kernel_size, self.weight_dropout, self.causal = kernel_size, weight_dropout, causal
        self.first_tap = -(kernel_size - 1) if causal else -(kernel_size // 2)  # offset of tap 0 from the query
        if cross:
            return  # the decoder's attention over the encoder: the base class's W^Q, W^K, W^V and W^O
        del self.w_qkv, self.w_o  # no queries or keys; W^O is built by register_w_o, after the kernel's parts
        self.w_in = nn.Linear(d_model, 2 * d_model)  # then the GLU: u = a * sigmoid(b)

    def register_w_o(self, d_model: int) -> None:
        """W^O (d_model -> d_model), registered after the parts a subclass builds, so that modules() lists the linear
        layers in the order they run (Fixup zeroes the last one)."""
        self.w_o = nn.Linear(d_model, d_model)

    def kernel_logits(self, u: torch.Tensor) -> torch.Tensor:
        """The kernels' logits (B|1, H, T|1, K) of positions u (B, T, d_model), before the softmax over taps."""
        raise NotImplementedError

    def self_heads(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None) -> torch.Tensor:
        """The convolution's H groups (B, H, T, d_model / H) of x (B, T, d_model); with a cache, x holds P .. P+T-1."""
        B, T, d = x.shape
        H, K = self.n_heads, self.kernel_size
        u = F.glu(self.w_in(x), dim=-1)  # (B, T, d_model)
        logits = self.kernel_logits(u)  # (B|1, H, T|1, K)
        v = self._heads(u, H, d // H)  # (B, H, T, d/H)
        if cache is not None:
            _, v = cache.append(v[..., :0], v)  # zero-width keys (B, H, P+T, 0), u of every position (B, H, P+T, d/H)
        t_k = v.size(2)
        j, inside = taps(T, t_k, self.first_tap, K, x.device)  # (T, K) key positions, (T, K) in the sequence
        allowed = inside if mask is None else inside & at_taps(mask, j)  # (B, 1, T, K)
        bias = self.positional.score_bias(T, t_k)  # (h, T, T_k) or None
        if bias is not None:  # at each tap's key; none at a tap outside the sequence (it has no key)
            logits = logits + at_taps(bias.to(logits.dtype), j).masked_fill(~inside, 0.0)  # (B|1, H, T, K)
        weights = F.dropout(logits.softmax(dim=-1), self.weight_dropout, self.training) * allowed  # (B|1, H, T, K)
        weights = weights.expand(B, H, T, K)
        if self.keep_weights:  # as attention weights over the keys, for inspection
            self.weights = weights.new_zeros(*weights.shape[:-1], t_k).scatter_add(
                -1, j.expand_as(weights), weights).detach()  # (B, H, T, T_k)
        tapped = v[:, :, j]  # (B, H, T, K, d/H): each query's K taps
        return torch.einsum("bhtk,bhtkc->bhtc", weights, tapped)  # (B, H, T, d/H)

    def output(self, heads: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """W^O over the concatenated groups (B, H, T, d_model / H), or cross-attention's heads (B, h, T, d_v)."""
        B, _, T, _ = heads.shape
        return self.w_o(heads.transpose(1, 2).reshape(B, T, -1))  # (B, T, d_model)

    def flops_per_token(self, length: int) -> float:
        """Self-attention: the K-tap weighted sum, 2 K d_model per position (an einsum); cross-attention: the base
        class's count."""
        if self.cross:
            return super().flops_per_token(length)
        return 2.0 * self.kernel_size * self.w_o.in_features

    def scale_values(self, gain: float) -> None:
        """DeepNorm's beta on the GLU's value half of the input projection and on W^O (cross-attention: the base
        class's)."""
        if self.cross:
            return super().scale_values(gain)
        with torch.no_grad():
            self.w_in.weight[: self.w_o.in_features].mul_(gain)  # the rows of a in a * sigmoid(b)
            self.w_o.weight.mul_(gain)

    def extra_repr(self) -> str:
        return (super().extra_repr() + f", kernel_size={self.kernel_size}, causal={self.causal}, "
                f"weight_dropout={self.weight_dropout}")


@register("attention", "lightconv")
class LightweightConvolution(Convolution):
    """LightConv: a GLU, then one softmax-normalised kernel of width K per channel group (Wu et al. 2019)."""

    def __init__(self, **dims: Any):
        super().__init__(**dims)
        if self.cross:
            return
        H, K = self.n_heads, self.kernel_size
        self.kernel = nn.Parameter(torch.empty(H, K))  # (H, K), shared by the group's channels
        bound = math.sqrt(6.0 / (K * (1 + H)))  # Xavier-uniform of an (H, 1, K) kernel, as fairseq
        nn.init.uniform_(self.kernel, -bound, bound)
        self.register_w_o(dims["d_model"])

    def kernel_logits(self, u: torch.Tensor) -> torch.Tensor:
        return self.kernel[None, :, None, :]  # (1, H, 1, K)


@register("attention", "dynamicconv")
class DynamicConvolution(Convolution):
    """DynamicConv: LightConv whose kernels each position predicts from its own input (Wu et al. 2019)."""

    def __init__(self, **dims: Any):
        super().__init__(**dims)
        if self.cross:
            return
        d_model = dims["d_model"]
        self.w_kernel = nn.Linear(d_model, self.n_heads * self.kernel_size)  # f(u_i): H kernels of K taps (W^Q)
        self.register_w_o(d_model)

    def kernel_logits(self, u: torch.Tensor) -> torch.Tensor:
        B, T, _ = u.shape
        return self.w_kernel(u).view(B, T, self.n_heads, self.kernel_size).transpose(1, 2)  # (B, H, T, K)
