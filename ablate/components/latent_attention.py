"""Multi-head latent attention (DeepSeek-AI 2024, "DeepSeek-V2", section 2.1): keys and values from a shared latent.

    c_KV = W^DKV x,    k = W^UK c_KV,    v = W^UV c_KV,    q = W^UQ (W^DQ x)  (or W^Q x)

Every position is compressed to one latent c_KV of ``d_latent`` numbers (RMS-normalised, as in the paper's
code), from which every head's keys and values are up-projected. The cache holds only the latents,
(B, 1, T, d_latent) in the k slot of the :class:`KVCache` and an empty (B, 1, T, 0) in its v slot (the layers make
the self-attention cache, so it stays a plain KVCache): d_latent numbers per position instead of h (d_k + d_v).
Each decoding step up-projects the whole cached latent and rotates the up-projected keys with the stack's
positional component from position 0. Cross-attention caches the encoder output's latent
(:meth:`project_memory`).

Not reproduced: DeepSeek's decoupled RoPE key (a separate rotated query part and a key part shared by the heads,
outside the latent) and the absorption of W^UK into W^Q at inference (an equivalent reordering of the same
products). Positions are applied to the up-projected keys, so a RoPE model caches the latent and rotates the keys
again at every step. Like every projection here, those of MLA carry biases (DeepSeek-V2's do not).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from ablate.components.attention import Attention, KVCache
from ablate.components.positional import Positional
from ablate.errors import ConfigError
from ablate.registry import register


@register("attention", "mla")
class MultiHeadLatentAttention(Attention):
    """Keys and values up-projected from a cached latent c_KV = W^DKV x of d_latent per position
    (DeepSeek-AI 2024, DeepSeek-V2)."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, attention_dropout: float = 0.0,
                 positional: Positional | None = None, cross: bool = False, d_latent: int = 64,
                 d_q_latent: int = 0, latent_norm: bool = True):
        """Builds the down- and up-projections in place of :class:`Attention`'s W^Q, W^K, W^V.

        Args:
            d_latent: size of the key/value latent c_KV, what the cache holds per position.
            d_q_latent: size of the query latent c_Q = W^DQ x; 0: queries straight from x, q = W^Q x.
            latent_norm: RMSNorm on each latent after its down-projection (the paper's code); False: none.

        Raises:
            ConfigError: a ``d_latent`` below 1 or a negative ``d_q_latent``.
        """
        if d_latent < 1:
            raise ConfigError("model.attention_args.d_latent", d_latent, "a positive integer: the cached latent's size")
        if d_q_latent < 0:
            raise ConfigError("model.attention_args.d_q_latent", d_q_latent,
                              "0 (queries from x) or a positive integer: the query latent's size")
        super().__init__(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, attention_dropout=attention_dropout,
                         positional=positional, cross=cross)
        for fused in ("w_qkv", "w_q", "w_kv"):  # the base class's projections, replaced below
            if hasattr(self, fused):
                delattr(self, fused)
        self.d_latent, self.d_q_latent, self.latent_norm = d_latent, d_q_latent, latent_norm

        def norm(d: int) -> nn.Module:
            return nn.RMSNorm(d) if latent_norm else nn.Identity()

        self.w_dkv = nn.Linear(d_model, d_latent)  # W^DKV
        self.kv_norm = norm(d_latent)
        self.w_uk = nn.Linear(d_latent, n_heads * d_k)  # W^UK
        self.w_uv = nn.Linear(d_latent, n_heads * d_v)  # W^UV
        if d_q_latent:
            self.w_q = nn.Sequential(OrderedDict(w_dq=nn.Linear(d_model, d_q_latent), q_norm=norm(d_q_latent),
                                                 w_uq=nn.Linear(d_q_latent, n_heads * d_k)))  # W^UQ (norm (W^DQ x))
        else:
            self.w_q = nn.Linear(d_model, n_heads * d_k)  # W^Q

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """c_KV = norm(W^DKV x): x (B, T, d_model) -> (B, 1, T, d_latent), one 'head' so that it fits a KVCache."""
        return self.kv_norm(self.w_dkv(x)).unsqueeze(1)  # (B, 1, T, d_latent)

    def up_project(self, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k = W^UK c_KV (B, h, T, d_k) and v = W^UV c_KV (B, h, T, d_v) of latents c (B, 1, T, d_latent)."""
        c = c.squeeze(1)  # (B, T, d_latent)
        k = self.normalize_k(self._heads(self.w_uk(c), self.n_heads, self.d_k))  # (B, h, T, d_k)
        return k, self._heads(self.w_uv(c), self.n_heads, self.d_v)  # (B, h, T, d_v)

    def queries(self, x: torch.Tensor) -> torch.Tensor:
        """q = W^Q x, or W^UQ norm(W^DQ x): x (B, T, d_model) -> (B, h, T, d_k)."""
        return self.normalize_q(self._heads(self.w_q(x), self.n_heads, self.d_k))  # (B, h, T, d_k)

    def project_memory(self, memory: torch.Tensor) -> KVCache:
        """Cross-attention's cache: the latent (B, 1, S, d_latent) of the encoder output (B, S, d_model) in the k
        slot, an empty (B, 1, S, 0) in the v slot."""
        c = self.latent(memory)  # (B, 1, S, d_latent)
        return KVCache(c, c[..., :0])

    def self_heads(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None) -> torch.Tensor:
        """Heads (B, h, T, d_v) of x (B, T, d_model), positions P .. P+T-1 with a cache holding P latents: the new
        latents join the cache, keys and values are up-projected from all of them, the keys rotated from 0."""
        offset = cache.length if cache is not None else 0
        c = self.latent(x)  # (B, 1, T, d_latent)
        if cache is not None:
            c, _ = cache.append(c, c[..., :0])  # (B, 1, P+T, d_latent)
        q = self.positional.rotate(self.queries(x), offset)  # (B, h, T, d_k)
        k, v = self.up_project(c)  # (B, h, P+T, d_k), (B, h, P+T, d_v)
        k = self.positional.rotate(k, 0)  # (B, h, P+T, d_k)
        return self.attend(q, k, v, mask, self.position_bias(q, k.size(2)))

    def cross_heads(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None,
                    memory: torch.Tensor | None) -> torch.Tensor:
        """The decoder's attention over the encoder output: keys and values up-projected from its cached latent."""
        c = (cache if cache is not None else self.project_memory(memory)).k  # (B, 1, S, d_latent)
        k, v = self.up_project(c)  # (B, h, S, d_k), (B, h, S, d_v)
        return self.attend(self.queries(x), k, v, mask, None)

    def scale_values(self, gain: float) -> None:
        """Multiply W^UV and W^O by ``gain`` (DeepNorm's beta; the latent and the keys keep theirs)."""
        with torch.no_grad():
            self.w_uv.weight.mul_(gain)
            self.w_o.weight.mul_(gain)

    def extra_repr(self) -> str:
        return (super().extra_repr() + f", d_latent={self.d_latent}, d_q_latent={self.d_q_latent}, "
                f"latent_norm={self.latent_norm}")
