"""Swappable Transformer components; importing this package registers the built-ins.

Each module holds one concept: a kind (:func:`ablate.registry.declare_kind`) with its interface and first variants,
or a family of variants of a kind declared elsewhere (adaptive softmax, mixtures of experts, synthesizers ...). The
data tasks (kind ``task``) are registered by :mod:`ablate.data`.
"""

from ablate.components import (  # noqa: F401  (registers the built-ins, in the order `ablate components` lists them)
    embedding,
    adaptive,
    mixture_softmax,
    positional,
    position_bias,
    relative,
    attention,
    head_variants,
    latent_attention,
    synthesizer,
    convolution,
    masks,
    feedforward,
    moe,
    norm,
    residual,
    sharing,
    universal,
    schedule,
)
