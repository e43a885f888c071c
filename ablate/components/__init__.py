"""Swappable Transformer components; importing this package registers the built-ins."""

from ablate.components import attention, feedforward, masks, norm, positional  # noqa: F401
