"""Position-wise feed-forward networks (section 3.3), their gated successors (Shazeer 2020), and the activations
Narang et al. (2021) compared in both."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ablate.registry import declare_kind, register

KIND = declare_kind("ffn", key="model.ffn", interface=nn.Module, default="relu",
                    description="position-wise feed-forward network of inner size d_ff: "
                                "(B, T, d_model) -> (B, T, d_model)")


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, applied to each position separately."""

    def __init__(self, *, d_model: int, d_ff: int, activation: nn.Module, bias: bool = True):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.activation(self.w_1(x)))  # (B, T, d) -> (B, T, d_ff) -> (B, T, d)


@register("ffn", "relu")
def relu_ffn(*, d_model: int, d_ff: int, bias: bool = True) -> FeedForward:
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (Vaswani et al. 2017, equation 2; the paper's)."""
    return FeedForward(d_model=d_model, d_ff=d_ff, activation=nn.ReLU(), bias=bias)


@register("ffn", "gelu")
def gelu_ffn(*, d_model: int, d_ff: int, bias: bool = True) -> FeedForward:
    """FFN with GELU in place of ReLU (Hendrycks & Gimpel 2016; BERT, GPT-2)."""
    return FeedForward(d_model=d_model, d_ff=d_ff, activation=nn.GELU(), bias=bias)


class GatedFeedForward(nn.Module):
    """FFN_GLU(x) = (act(x W) * x V) W2: three d_model x d_ff matrices, no biases by default (Shazeer 2020)."""

    def __init__(self, *, d_model: int, d_ff: int, activation: Callable[[torch.Tensor], torch.Tensor], bias: bool):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.activation(self.w_gate(x)) * self.w_up(x))  # (B, T, d_ff) gated -> (B, T, d)

    def extra_repr(self) -> str:
        return f"activation={getattr(self.activation, '__name__', self.activation)}"


@register("ffn", "swiglu")
def swiglu(*, d_model: int, d_ff: int, bias: bool = False) -> GatedFeedForward:
    """GLU with a Swish gate: (Swish(x W) * x V) W2 (Shazeer 2020)."""
    return GatedFeedForward(d_model=d_model, d_ff=d_ff, activation=F.silu, bias=bias)


@register("ffn", "geglu")
def geglu(*, d_model: int, d_ff: int, bias: bool = False) -> GatedFeedForward:
    """GLU with a GELU gate: (GELU(x W) * x V) W2 (Shazeer 2020)."""
    return GatedFeedForward(d_model=d_model, d_ff=d_ff, activation=F.gelu, bias=bias)


@register("ffn", "reglu")
def reglu(*, d_model: int, d_ff: int, bias: bool = False) -> GatedFeedForward:
    """GLU with a ReLU gate: (max(0, x W) * x V) W2 (Shazeer 2020)."""
    return GatedFeedForward(d_model=d_model, d_ff=d_ff, activation=F.relu, bias=bias)


# Narang et al. (2021) compared these in place of ReLU and GLU's gate. One table each, so that every variant is one
# line with its paper; the factories the loop below registers differ only in the activation.
ACTIVATIONS: dict[str, tuple[type[nn.Module], str]] = {
    "swish": (nn.SiLU, "FFN with Swish/SiLU, x sigmoid(x), in place of ReLU (Ramachandran et al. 2017)."),
    "elu": (nn.ELU, "FFN with ELU, x if x > 0 else e^x - 1, in place of ReLU (Clevert et al. 2016)."),
    "selu": (nn.SELU, "FFN with SELU, a scaled ELU, in place of ReLU (Klambauer et al. 2017)."),
    "sigmoid": (nn.Sigmoid, "FFN with the logistic sigmoid in place of ReLU (a control Narang et al. 2021 compared)."),
    "softplus": (nn.Softplus, "FFN with softplus, log(1 + e^x), in place of ReLU (Dugas et al. 2001)."),
}

GATES: dict[str, tuple[type[nn.Module], str]] = {
    "glu": (nn.Sigmoid, "GLU with a sigmoid gate: (sigmoid(x W) * x V) W2 (Dauphin et al. 2017; Shazeer 2020)."),
    "bilinear": (nn.Identity,
                 "Bilinear GLU, no activation: (x W * x V) W2 (Shazeer 2020; LiGLU in Narang et al. 2021)."),
}


def _plain(name: str, activation: type[nn.Module], description: str) -> None:
    def factory(*, d_model: int, d_ff: int, bias: bool = True) -> FeedForward:
        return FeedForward(d_model=d_model, d_ff=d_ff, activation=activation(), bias=bias)

    factory.__name__ = factory.__qualname__ = f"{name}_ffn"
    factory.__doc__ = description
    register("ffn", name, description=description)(factory)


def _gated(name: str, activation: type[nn.Module], description: str) -> None:
    def factory(*, d_model: int, d_ff: int, bias: bool = False) -> GatedFeedForward:
        return GatedFeedForward(d_model=d_model, d_ff=d_ff, activation=activation(), bias=bias)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = description
    register("ffn", name, description=description)(factory)


for _name, (_activation, _description) in ACTIVATIONS.items():
    _plain(_name, _activation, _description)
for _name, (_activation, _description) in GATES.items():
    _gated(_name, _activation, _description)
del _name, _activation, _description
