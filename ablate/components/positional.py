"""Positional information (section 3.5): sinusoidal, learned, none, and rotary (RoPE).

Absolute encodings are added to the scaled token embeddings (``forward``);
relative ones rotate queries and keys inside self-attention (``rotate``). Each
class overrides the hook it needs; the other is the identity.
"""

from __future__ import annotations


import torch
from torch import nn

from ablate.errors import ConfigError
from ablate.registry import register


class Positional(nn.Module):
    """Base class: no position information at all."""

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Add absolute positions to ``x`` (B, T, d_model) whose first row is position ``offset``."""
        return x

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Apply relative positions to queries or keys ``x`` (B, h, T, d_k)."""
        return x


def sinusoid_table(length: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...) (section 3.5). Returns (length, d_model)."""
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    inv_freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (ceil(d/2),)
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq[: d_model // 2])
    return table.float()


@register("positional", "sinusoidal")
class SinusoidalPositional(Positional):
    """Fixed sinusoids added to the embeddings (section 3.5; the paper's choice)."""

    def __init__(self, *, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoid_table(1024, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):  # sinusoids extrapolate: grow the table
            self.table = sinusoid_table(2 * end, self.d_model).to(self.table.device)
        return x + self.table[offset:end].to(x.dtype)  # (B, T, d) + (T, d)


@register("positional", "learned")
class LearnedPositional(Positional):
    """A learned embedding per position up to max_len (section 3.5, Table 3 row E)."""

    def __init__(self, *, d_model: int, max_len: int = 1024):
        super().__init__()
        if max_len <= 0:
            raise ConfigError("model.positional_args.max_len", max_len, "a positive integer")
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.size(1)
        if end > self.embedding.num_embeddings:
            raise ValueError(
                f"sequence of length {end} exceeds model.positional_args.max_len={self.embedding.num_embeddings}"
            )
        return x + self.embedding.weight[offset:end].to(x.dtype)  # (B, T, d) + (T, d)


@register("positional", "none")
class NoPositional(Positional):
    """No position information: attention sees a bag of tokens (the ablation's control)."""


@register("positional", "rope")
class RotaryPositional(Positional):
    """Rotary position embedding on queries and keys (Su et al. 2021), pairs (i, i + d_k/2)."""

    def __init__(self, *, d_k: int, base: float = 10000.0):
        super().__init__()
        if d_k % 2:
            raise ConfigError("model.d_k", d_k, "an even number for positional=rope")
        self.register_buffer("inv_freq", base ** (-torch.arange(0, d_k, 2).float() / d_k), persistent=False)

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.size(-2)
        pos = torch.arange(offset, offset + T, device=x.device, dtype=torch.float32)
        angles = torch.outer(pos, self.inv_freq)  # (T, d_k/2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)  # (B, h, T, d_k/2) each
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
