"""Swappable Transformer components, one kind per module; importing this package registers the built-ins.

Each module declares its kind (:func:`ablate.registry.declare_kind`) and registers its variants. The
data tasks (kind ``task``) are registered by :mod:`ablate.data`.
"""

from ablate.components import (  # noqa: F401  (registers the built-ins, in the order `ablate components` lists them)
    embedding,
    positional,
    position_bias,
    attention,
    masks,
    feedforward,
    norm,
    residual,
    sharing,
    schedule,
)
