"""Parameter sharing across the layers of a stack: the paper's N distinct layers, or one layer applied N times."""

from __future__ import annotations

from typing import Callable

from torch import nn

from ablate.registry import declare_kind, register


class LayerSharing:
    """Decides which of a stack's N layers are distinct modules."""

    def layers(self, n: int, make: Callable[[], nn.Module]) -> list[nn.Module]:
        """The N layers of a stack, in order; ``make`` builds a fresh layer."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


KIND = declare_kind("sharing", key="model.sharing", interface=LayerSharing, default="none",
                    description="parameter sharing across the layers of each stack")


@register("sharing", "none")
class NoSharing(LayerSharing):
    """N layers with their own parameters (Vaswani et al. 2017; the paper's)."""

    def layers(self, n: int, make: Callable[[], nn.Module]) -> list[nn.Module]:
        return [make() for _ in range(n)]


@register("sharing", "all")
class ShareAll(LayerSharing):
    """One layer's parameters used by all N layers of a stack (Lan et al. 2020, ALBERT; Dehghani et al. 2019, Universal Transformer)."""

    def layers(self, n: int, make: Callable[[], nn.Module]) -> list[nn.Module]:
        layer = make()
        return [layer] * n
