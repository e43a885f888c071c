"""Relative position representations (Shaw et al. 2018): a learned vector per clipped distance, added to the keys.

    e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_k),    a^K_ij = w^K_clip(j - i, k),    clip(d, k) = max(-k, min(k, d))

so the scores gain q_i . a^K_ij, a bias that depends on the query (:meth:`Positional.query_bias`), computed as the
product of every query with the 2k + 1 vectors, then gathered at each pair's clipped distance. The vectors are
shared by the heads and learned per layer (as tensor2tensor's implementation, which the paper's experiments used);
Shaw et al. found the value-side vectors a^V unnecessary, so there are none. Nothing is added to the embeddings.
"""

from __future__ import annotations

import torch
from torch import nn

from ablate.components.positional import LEARNED_BIAS_NOT_FUSABLE, PerLayerPositional, Positional
from ablate.errors import ConfigError
from ablate.registry import register


def clipped_distances(t_q: int, t_k: int, clip: int, device: torch.device) -> torch.Tensor:
    """(T_q, T_k): clip(j - i, k) + k, an index into the 2k + 1 vectors; queries are the last T_q of T_k positions."""
    i = torch.arange(t_k - t_q, t_k, device=device)[:, None]  # (T_q, 1)
    j = torch.arange(t_k, device=device)[None, :]  # (1, T_k)
    return (j - i).clamp(-clip, clip) + clip


class RelativeKeyTable(Positional):
    """One layer's 2k + 1 vectors a^K (d_k each) and the query bias they give."""

    def __init__(self, *, d_k: int, n_heads: int, clip: int):
        super().__init__()
        self.n_heads, self.clip = n_heads, clip
        self.table = nn.Parameter(torch.empty(2 * clip + 1, d_k))  # (2k+1, d_k)
        nn.init.normal_(self.table, std=d_k**-0.5)

    def query_bias(self, q: torch.Tensor, t_k: int) -> torch.Tensor | None:
        B, h, t_q, _ = q.shape
        per_distance = torch.einsum("bhqd,rd->bhqr", q, self.table)  # (B, h, T_q, 2k+1)
        index = clipped_distances(t_q, t_k, self.clip, q.device).expand(B, h, t_q, t_k)  # (B, h, T_q, T_k)
        return per_distance.gather(-1, index)  # (B, h, T_q, T_k): q_i . a^K_ij

    def flops_per_token(self, length: int) -> float:
        """Each query against the 2k + 1 vectors, in every head: 2 h d_k (2k + 1); the heads are the query's."""
        return 2.0 * self.n_heads * self.table.numel()

    def extra_repr(self) -> str:
        return f"clip={self.clip}"


@register("positional", "relative", not_fusable=LEARNED_BIAS_NOT_FUSABLE)
class RelativeKeys(PerLayerPositional):
    """Relative position representations: q_i . a^K_ij added to each score, a^K per clipped distance j - i,
    per layer (Shaw et al. 2018)."""

    def __init__(self, *, d_k: int, n_heads: int, clip: int = 16):
        super().__init__()
        if clip < 1:
            raise ConfigError("model.positional_args.clip", clip, "a positive integer: the largest distance told apart")
        self.d_k, self.n_heads, self.clip = d_k, n_heads, clip

    def make(self) -> RelativeKeyTable:
        return RelativeKeyTable(d_k=self.d_k, n_heads=self.n_heads, clip=self.clip)

    def extra_repr(self) -> str:
        return f"clip={self.clip}"
