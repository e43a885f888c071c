"""Models built on the meta device: shapes without memory, for parameter counts, FLOPs and planning.

Initialising a meta tensor does nothing, yet its first use costs 1-2 s: torch runs its initialisers through
Python decompositions on that device. :func:`build_on_meta` skips them, so ``ablate describe`` and a sweep's
dry run start fast.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torch import nn
from torch.overrides import TorchFunctionMode

# In-place fills, and the nn.init functions that make them (called first, with the tensor as a keyword).
_INIT = {"normal_", "uniform_", "zero_", "zeros_", "ones_", "fill_", "constant_", "copy_", "mul_", "trunc_normal_",
         "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"}


class _SkipMetaInit(TorchFunctionMode):
    """Filling a meta tensor in place (the initialisers' only effect there) returns it unchanged."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")  # nn.init functions pass it as a keyword
        if getattr(func, "__name__", "") in _INIT and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **kwargs)


def build_on_meta(cfg: DictConfig) -> nn.Module:
    """The model ``cfg`` describes, every tensor on the meta device (see :func:`ablate.build_model`)."""
    from ablate.model.builder import build_model

    with torch.device("meta"), _SkipMetaInit():
        return build_model(cfg)
