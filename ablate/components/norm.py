"""Normalisation layers: LayerNorm (the paper's) and RMSNorm. Where they sit is :mod:`ablate.components.residual`."""

from __future__ import annotations

from torch import nn

from ablate.registry import declare_kind, register

KIND = declare_kind("norm", key="model.norm", interface=nn.Module, default="layernorm",
                    description="normalisation layer over d_model, used by the residual connections")


@register("norm", "layernorm")
def layer_norm(*, d_model: int, eps: float = 1e-5) -> nn.LayerNorm:
    """LayerNorm with gain and bias (Ba et al. 2016; the paper's)."""
    return nn.LayerNorm(d_model, eps=eps)


@register("norm", "rmsnorm")
def rms_norm(*, d_model: int, eps: float = 1e-6) -> nn.RMSNorm:
    """RMSNorm: scale by the root mean square, gain only (Zhang & Sennrich 2019)."""
    return nn.RMSNorm(d_model, eps=eps)
