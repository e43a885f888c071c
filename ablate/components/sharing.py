"""A stack of layers, and how its N layers share parameters: the paper's N distinct layers, or fewer, reused.

A sharing variant decides which of a stack's N layers are distinct modules (:meth:`LayerSharing.layers`) and may
build the stack around them (:meth:`LayerSharing.stack`: the Universal Transformer's halting loop). A value that
differs between layers (a per-layer mask) reaches each layer through :class:`PerLayer`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import nn

from ablate.errors import ConfigError
from ablate.registry import declare_kind, register

MakeLayer = Callable[..., nn.Module]  # make(layer: int = 0): a fresh layer, built for the layer of that index


class PerLayer(list):
    """One value per layer of a stack (a layer's own self-attention mask): layer i receives item i."""


def layer_args(args: Sequence[Any], i: int) -> list[Any]:
    """The arguments layer ``i`` receives: item i of each :class:`PerLayer`, the others as they are."""
    return [a[i] if isinstance(a, PerLayer) else a for a in args]


class Stack(nn.Module):
    """N layers (distinct or shared) and, for pre-norm placements, a final norm."""

    def __init__(self, layers: list[nn.Module], final_norm: nn.Module):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, x: torch.Tensor, *args: Any, caches: Sequence[Any] | None = None) -> torch.Tensor:
        """x (B, T, d_model) through every layer; ``caches``: one per layer, for incremental decoding."""
        caches = caches if caches is not None else [None] * len(self.layers)
        for i, (layer, cache) in enumerate(zip(self.layers, caches)):
            x = layer(x, *layer_args(args, i), cache=cache)
        return self.final_norm(x)


class LayerSharing:
    """Decides which of a stack's N layers are distinct modules, and builds the stack."""

    def layers(self, n: int, make: MakeLayer) -> list[nn.Module]:
        """The N layers of a stack, in order; ``make(i)`` builds a fresh layer for index i."""
        raise NotImplementedError

    def stack(self, layers: list[nn.Module], final_norm: nn.Module) -> nn.Module:
        """The stack that runs ``layers`` (from :meth:`layers`) in order, then ``final_norm``."""
        return Stack(layers, final_norm)

    def __repr__(self) -> str:
        return type(self).__name__


KIND = declare_kind("sharing", key="model.sharing", interface=LayerSharing, default="none",
                    description="parameter sharing across the layers of each stack, and how the stack runs them")


@register("sharing", "none")
class NoSharing(LayerSharing):
    """N layers with their own parameters (Vaswani et al. 2017; the paper's)."""

    def layers(self, n: int, make: MakeLayer) -> list[nn.Module]:
        return [make(i) for i in range(n)]


@register("sharing", "all")
class ShareAll(LayerSharing):
    """One layer's parameters used by all N layers of a stack (Lan et al. 2020, ALBERT; Dehghani et al. 2019,
    Universal Transformer)."""

    def layers(self, n: int, make: MakeLayer) -> list[nn.Module]:
        layer = make(0)
        return [layer] * n


@register("sharing", "encoder")
class ShareEncoder(LayerSharing):
    """The encoder's N layers share one layer's parameters, the decoder's are distinct
    (Lan et al. 2020's sharing, one stack)."""

    def __init__(self, *, stack: str, decoder_only: bool):
        if decoder_only:  # no encoder to share: the model would be sharing=none's, under another name
            raise ConfigError("model.sharing", "encoder", "a sharing for model.arch=decoder_only, which has no "
                              "encoder: none, all, decoder or universal")
        self.shared = stack == "encoder"

    def layers(self, n: int, make: MakeLayer) -> list[nn.Module]:
        return ShareAll().layers(n, make) if self.shared else NoSharing().layers(n, make)


@register("sharing", "decoder")
class ShareDecoder(LayerSharing):
    """The decoder's N layers share one layer's parameters, the encoder's are distinct
    (Lan et al. 2020's sharing, one stack)."""

    def __init__(self, *, stack: str):
        self.shared = stack == "decoder"

    def layers(self, n: int, make: MakeLayer) -> list[nn.Module]:
        return ShareAll().layers(n, make) if self.shared else NoSharing().layers(n, make)
