"""Position information (section 3.5), in the three places it can go.

A positional component may act at any of three hooks; the base class makes each the identity:

- ``forward(x, offset)``: added to the scaled token embeddings (sinusoidal, learned);
- ``rotate(x, offset)``: applied to queries and keys inside self-attention (RoPE);
- ``score_bias(t_q, t_k)``: added to the attention scores, per head (ALiBi, T5's relative bias; see
  :mod:`ablate.components.position_bias`);
- ``query_bias(q, t_k)``: a score bias that depends on the queries (Shaw et al.'s relative keys).

One component serves a whole stack (every layer of the encoder, or of the decoder), built with
``stack`` = ``"encoder"`` or ``"decoder"``; ``for_layer(i)`` gives layer i its own when a variant wants that.
``max_len`` is the longest sequence it can encode (None: any length), which decoding and length-extrapolation
evaluation respect.
"""

from __future__ import annotations

import torch
from torch import nn

from ablate.errors import ConfigError
from ablate.registry import declare_kind, register

# Why a variant whose score or query bias is learned cannot train its seeds as one fused model (``not_fusable``): the
# attention hands that bias to scaled_dot_product_attention as a float mask that needs a gradient, and under
# torch.func.vmap torch 2.13 runs the CPU flash kernel on it, which refuses (tests/train/test_fusable.py checks it).
LEARNED_BIAS_NOT_FUSABLE = ("a learned attention-score bias, under vmap, goes to torch's CPU flash-attention kernel, "
                            "which cannot differentiate its mask")


class Positional(nn.Module):
    """Base class: no position information at all. Override the hooks a variant needs."""

    max_len: int | None = None  # the longest sequence it can encode; None: unlimited

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Add absolute positions to ``x`` (B, T, d_model) whose first row is position ``offset``."""
        return x

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Apply relative positions to queries or keys ``x`` (B, h, T, d_k) whose first row is position ``offset``."""
        return x

    def score_bias(self, t_q: int, t_k: int) -> torch.Tensor | None:
        """A bias (h, T_q, T_k) added to the attention scores, queries being the last T_q of T_k positions;
        None: none."""
        return None

    def query_bias(self, q: torch.Tensor, t_k: int) -> torch.Tensor | None:
        """A bias (B, h, T_q, T_k) that depends on the queries q (B, h, T_q, d_k), the last T_q of T_k positions,
        before the attention's scale (it is scaled with the scores: q (k + a)^T / sqrt(d_k)); None: none."""
        return None

    @property
    def biases_scores(self) -> bool:
        """Whether it adds to the attention scores (overrides :meth:`score_bias` or :meth:`query_bias`)."""
        kind = type(self)
        return kind.score_bias is not Positional.score_bias or kind.query_bias is not Positional.query_bias

    def for_layer(self, layer: int) -> Positional:
        """The component the self-attention of layer ``layer`` uses: this one (shared by the stack) here; a variant
        with parameters of its own per layer returns a fresh one."""
        return self


class PerLayerPositional(Positional):
    """A stack's positional component whose layers each get a module of their own (:meth:`for_layer`): it holds the
    arguments, adds nothing itself, and ``make()`` builds a fresh module for each layer."""

    def make(self) -> Positional:
        raise NotImplementedError

    def for_layer(self, layer: int) -> Positional:
        return self.make()


KIND = declare_kind("positional", key="model.positional", interface=Positional, default="sinusoidal",
                    description="position information: added to the input, applied to queries and keys, "
                                "or a score bias")


def sinusoid_table(length: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...) (section 3.5). Returns (length, d_model),
    computed on the CPU (a constant, whatever the default device)."""
    pos = torch.arange(length, dtype=torch.float64, device="cpu").unsqueeze(1)  # (T, 1)
    inv_freq = torch.pow(10000.0,
                         -torch.arange(0, d_model, 2, dtype=torch.float64, device="cpu") / d_model)  # (ceil(d/2),)
    table = torch.zeros(length, d_model, dtype=torch.float64, device="cpu")
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq[: d_model // 2])
    return table.float()


def sinusoid_buffer(length: int, d_model: int) -> torch.Tensor:
    """:func:`sinusoid_table` on the default device; on the meta device (:mod:`ablate.model.meta`: shapes only) an
    empty table of its shape, whose values would be computed only to be thrown away."""
    device = torch.get_default_device()
    if device.type == "meta":
        return torch.empty(length, d_model, device=device)
    return sinusoid_table(length, d_model).to(device)


@register("positional", "sinusoidal")
class SinusoidalPositional(Positional):
    """Fixed sinusoids added to the embeddings (Vaswani et al. 2017, section 3.5; the paper's)."""

    def __init__(self, *, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoid_buffer(1024, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):  # sinusoids extrapolate: grow the table
            self.table = sinusoid_table(2 * end, self.d_model).to(self.table.device)
        return x + self.table[offset:end].to(x.dtype)  # (B, T, d) + (T, d)


@register("positional", "learned")
class LearnedPositional(Positional):
    """A learned embedding per position up to max_len (Gehring et al. 2017; Table 3 row E)."""

    def __init__(self, *, d_model: int, max_len: int = 1024):
        super().__init__()
        if max_len <= 0:
            raise ConfigError("model.positional_args.max_len", max_len, "a positive integer")
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(f"sequence of length {end} exceeds model.positional_args.max_len={self.max_len}")
        return x + self.embedding.weight[offset:end].to(x.dtype)  # (B, T, d) + (T, d)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}"


@register("positional", "none")
class NoPositional(Positional):
    """No positions: an encoder sees a bag of tokens (control; a causal LM still infers them, Haviv et al. 2022)."""


@register("positional", "rope")
class RotaryPositional(Positional):
    """Rotary position embedding of queries and keys, pairs (i, i + d_k/2) (Su et al. 2021, RoFormer)."""

    def __init__(self, *, d_k: int, base: float = 10000.0):
        super().__init__()
        if d_k % 2:
            raise ConfigError("model.d_k", d_k, "an even number for positional=rope")
        if base <= 1:
            raise ConfigError("model.positional_args.base", base, "a number greater than 1")
        self.base = base
        inv_freq = base ** (-torch.arange(0, d_k, 2, device="cpu").float() / d_k)  # (d_k/2,)
        self.register_buffer("inv_freq", inv_freq.to(torch.get_default_device()), persistent=False)

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.size(-2)
        pos = torch.arange(offset, offset + T, device=x.device, dtype=torch.float32)
        angles = torch.outer(pos, self.inv_freq)  # (T, d_k/2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)  # (B, h, T, d_k/2) each
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def extra_repr(self) -> str:
        return f"base={self.base}"


@register("positional", "partial_rope")
class PartialRotary(RotaryPositional):
    """RoPE on the first `fraction` of each head's d_k, the rest left unrotated
    (Black et al. 2022, GPT-NeoX-20B; Wang & Komatsuzaki 2021, GPT-J)."""

    def __init__(self, *, d_k: int, base: float = 10000.0, fraction: float = 0.25):
        rotary = 2 * int(fraction * d_k / 2)  # an even number of dimensions, rotated in pairs (i, i + rotary/2)
        if not 0 < fraction <= 1 or rotary < 2:
            raise ConfigError("model.positional_args.fraction", fraction,
                              f"a fraction in (0, 1] of model.d_k={d_k} that leaves at least 2 dimensions to rotate")
        super().__init__(d_k=rotary, base=base)
        self.rotary = rotary

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        rotated = super().rotate(x[..., : self.rotary], offset)  # (B, h, T, rotary)
        return torch.cat((rotated, x[..., self.rotary:]), dim=-1)  # (B, h, T, d_k)

    def extra_repr(self) -> str:
        return f"rotary={self.rotary}, base={self.base}"
