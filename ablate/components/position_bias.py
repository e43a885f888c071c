"""Position information as a bias on the attention scores: ALiBi and T5's relative position bias.

Neither adds anything to the input embeddings; each gives every self-attention head a bias
(h, T_q, T_k) that the attention adds to its scaled scores before the softmax, where the boolean
mask then sets the keys a query may not attend to to -inf (the mask convention is unchanged).
Cross-attention has no position bias (as in T5).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ablate.components.positional import LEARNED_BIAS_NOT_FUSABLE, PerLayerPositional, Positional
from ablate.errors import ConfigError
from ablate.registry import register


def _relative(t_q: int, t_k: int, device: torch.device) -> torch.Tensor:
    """(T_q, T_k) key position minus query position; queries are the last T_q of T_k positions."""
    i = torch.arange(t_k - t_q, t_k, device=device)[:, None]  # (T_q, 1)
    j = torch.arange(t_k, device=device)[None, :]  # (1, T_k)
    return j - i


def alibi_slopes(n_heads: int) -> list[float]:
    """Head slopes of ALiBi (Press et al. 2022, section 3): for h a power of two, the geometric sequence
    2^(-8/h), 2^(-16/h), ..., 2^(-8); otherwise the slopes of the nearest lower power of two, then every
    other slope of the next one, until there are h."""
    if n_heads & (n_heads - 1) == 0:
        return [2 ** (-8 * (i + 1) / n_heads) for i in range(n_heads)]
    lower = 2 ** math.floor(math.log2(n_heads))
    return alibi_slopes(lower) + alibi_slopes(2 * lower)[0::2][: n_heads - lower]


@register("positional", "alibi")
class ALiBi(Positional):
    """Attention with linear biases: head k adds -m_k |i - j| to its scores (Press et al. 2022); no embeddings."""

    def __init__(self, *, n_heads: int):
        super().__init__()
        self.register_buffer("slopes", torch.tensor(alibi_slopes(n_heads), device="cpu").to(torch.get_default_device()),
                             persistent=False)  # (h,)

    def score_bias(self, t_q: int, t_k: int) -> torch.Tensor | None:
        distance = _relative(t_q, t_k, self.slopes.device).abs().float()  # (T_q, T_k)
        return -self.slopes[:, None, None] * distance  # (h, T_q, T_k)


def t5_bucket(relative: torch.Tensor, *, bidirectional: bool, num_buckets: int = 32,
              max_distance: int = 128) -> torch.Tensor:
    """T5's bucket of each relative position (key minus query) (Raffel et al. 2020, section 2.1).

    Bidirectional: half the buckets hold keys after the query. Distances below half of a side's
    buckets get a bucket each; longer ones share logarithmically wider buckets up to
    ``max_distance``, beyond which all fall in the side's last bucket. Unidirectional (a decoder):
    every key after the query falls in bucket 0, with the query itself.
    """
    side = num_buckets // 2 if bidirectional else num_buckets
    offset = (relative > 0).long() * side if bidirectional else torch.zeros_like(relative)
    distance = relative.abs() if bidirectional else (-relative).clamp(min=0)
    exact = side // 2
    wide = exact + (torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
                    * (side - exact)).long()
    return offset + torch.where(distance < exact, distance, wide.clamp(max=side - 1))


def _check_buckets(num_buckets: int, max_distance: int) -> None:
    if num_buckets < 4 or num_buckets % 2:
        raise ConfigError("model.positional_args.num_buckets", num_buckets, "an even integer of at least 4")
    if max_distance <= num_buckets // 2:
        raise ConfigError("model.positional_args.max_distance", max_distance,
                          f"an integer above num_buckets / 2 = {num_buckets // 2}")


@register("positional", "t5_bias", not_fusable=LEARNED_BIAS_NOT_FUSABLE)
class T5RelativeBias(Positional):
    """A learned scalar per head for each bucket of relative position, shared by a stack's layers
    (Raffel et al. 2020)."""

    def __init__(self, *, n_heads: int, d_model: int, stack: str, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        _check_buckets(num_buckets, max_distance)
        self.bidirectional = stack == "encoder"  # the decoder buckets only keys at or before the query
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bias = nn.Embedding(num_buckets, n_heads)  # (buckets, h)
        nn.init.normal_(self.bias.weight, std=d_model**-0.5)

    def score_bias(self, t_q: int, t_k: int) -> torch.Tensor | None:
        buckets = t5_bucket(_relative(t_q, t_k, self.bias.weight.device), bidirectional=self.bidirectional,
                            num_buckets=self.num_buckets, max_distance=self.max_distance)  # (T_q, T_k)
        return self.bias(buckets).permute(2, 0, 1)  # (h, T_q, T_k)

    def extra_repr(self) -> str:
        return f"bidirectional={self.bidirectional}, num_buckets={self.num_buckets}, max_distance={self.max_distance}"


@register("positional", "t5_bias_layer", not_fusable=LEARNED_BIAS_NOT_FUSABLE)
class T5BiasPerLayer(PerLayerPositional):
    """T5's bucketed relative bias with a table of its own in every layer, not shared by the stack
    (as Narang et al. 2021 compared; Raffel et al. 2020 share one)."""

    def __init__(self, *, n_heads: int, d_model: int, stack: str, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        _check_buckets(num_buckets, max_distance)
        self.args = dict(n_heads=n_heads, d_model=d_model, stack=stack, num_buckets=num_buckets,
                         max_distance=max_distance)

    def make(self) -> T5RelativeBias:
        return T5RelativeBias(**self.args)
