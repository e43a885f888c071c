"""The residual connection around each sub-layer, and where its norm sits (kind ``norm_position``).

The paper's is post-norm, LayerNorm(x + Dropout(Sublayer(x))) (sections 3.1 and 5.4). Each variant
says whether a stack ends with a final norm (``final_norm``) and may re-initialise the sub-layer it
wraps once the model is built (:meth:`Residual.init_sublayer`, for DeepNorm).
"""

from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn

from ablate.errors import ConfigError
from ablate.registry import declare_kind, register

Sublayer = Callable[[torch.Tensor], torch.Tensor]


class Residual(nn.Module):
    """A residual connection around one sub-layer (B, T, d_model) -> (B, T, d_model), with dropout on its output."""

    final_norm: bool = False  # does each stack end with a norm?

    def __init__(self, *, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        raise NotImplementedError

    def init_sublayer(self, sublayer: nn.Module) -> None:
        """Re-initialise the wrapped sub-layer after the model's own initialisation; nothing here."""


KIND = declare_kind("norm_position", key="model.norm_position", interface=Residual, default="post",
                    description="the residual connection around each sub-layer: where its norm sits, or none")


@register("norm_position", "post")
class PostNorm(Residual):
    """Norm(x + Dropout(Sublayer(x))) (Vaswani et al. 2017, sections 3.1 and 5.4; the paper's)."""

    def __init__(self, *, norm: nn.Module, dropout: float):
        super().__init__(dropout=dropout)
        self.norm = norm

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


@register("norm_position", "pre")
class PreNorm(Residual):
    """x + Dropout(Sublayer(Norm(x))), and a final norm on each stack (Xiong et al. 2020)."""

    final_norm = True

    def __init__(self, *, norm: nn.Module, dropout: float):
        super().__init__(dropout=dropout)
        self.norm = norm

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.dropout(sublayer(self.norm(x)))


@register("norm_position", "sandwich")
class SandwichNorm(Residual):
    """x + Dropout(Norm(Sublayer(Norm(x)))): pre-norm plus a norm of the sub-layer's output
    (Ding et al. 2021, CogView)."""

    final_norm = True

    def __init__(self, *, norm: nn.Module, dropout: float):
        super().__init__(dropout=dropout)
        self.norm, self.out_norm = norm, copy.deepcopy(norm)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.dropout(self.out_norm(sublayer(self.norm(x))))


@register("norm_position", "rezero")
class ReZero(Residual):
    """x + alpha * Dropout(Sublayer(x)), one learned alpha per connection (the authors' layers share one),
    initialised to 0; no norm (Bachlechner et al. 2020)."""

    def __init__(self, *, dropout: float):
        super().__init__(dropout=dropout)
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.alpha * self.dropout(sublayer(x))


def deepnorm_constants(*, stack: str, n_encoder_layers: int, n_decoder_layers: int,
                       decoder_only: bool) -> tuple[float, float]:
    """DeepNorm's (alpha, beta) for a layer of ``stack`` (Wang et al. 2022, DeepNet, Figure 2 / Table 1).

    Encoder-decoder with N encoder and M decoder layers: encoder alpha = 0.81 (N^4 M)^(1/16),
    beta = 0.87 (N^4 M)^(-1/16); decoder alpha = (3M)^(1/4), beta = (12M)^(-1/4).
    Decoder-only with M layers: alpha = (2M)^(1/4), beta = (8M)^(-1/4).
    """
    N, M = n_encoder_layers, n_decoder_layers
    if decoder_only:
        return (2 * M) ** 0.25, (8 * M) ** -0.25
    if stack == "encoder":
        return 0.81 * (N**4 * M) ** (1 / 16), 0.87 * (N**4 * M) ** (-1 / 16)
    return (3 * M) ** 0.25, (12 * M) ** -0.25


@register("norm_position", "deepnorm")
class DeepNorm(Residual):
    """Norm(alpha x + Dropout(Sublayer(x))), with the sub-layer's value, output and FFN weights scaled by beta
    at init (Wang et al. 2022)."""

    def __init__(self, *, norm: nn.Module, dropout: float, stack: str, n_encoder_layers: int, n_decoder_layers: int,
                 decoder_only: bool):
        super().__init__(dropout=dropout)
        self.norm = norm
        self.alpha, self.beta = deepnorm_constants(stack=stack, n_encoder_layers=n_encoder_layers,
                                                   n_decoder_layers=n_decoder_layers, decoder_only=decoder_only)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return self.norm(self.alpha * x + self.dropout(sublayer(x)))

    def init_sublayer(self, sublayer: nn.Module) -> None:
        """Attention: its value and output projections times beta (queries and keys keep theirs); FFN: every weight."""
        scale_values = getattr(sublayer, "scale_values", None)
        if scale_values is not None:
            scale_values(self.beta)
            return
        with torch.no_grad():
            for module in sublayer.modules():
                if isinstance(module, nn.Linear):
                    module.weight.mul_(self.beta)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha:.4g}, beta={self.beta:.4g}"


@register("norm_position", "rezero_norm")
class ReZeroNorm(Residual):
    """x + alpha * Dropout(Sublayer(Norm(x))), alpha learned from 0, and a final norm: ReZero with model.norm
    (layernorm, rmsnorm) (Narang et al. 2021)."""

    final_norm = True

    def __init__(self, *, norm: nn.Module, dropout: float):
        super().__init__(dropout=dropout)
        self.norm = norm
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.alpha * self.dropout(sublayer(self.norm(x)))


@register("norm_position", "layerscale")
class LayerScale(Residual):
    """x + diag(lambda) Dropout(Sublayer(Norm(x))), a learned scale per channel from `init`, and a final norm
    (Touvron et al. 2021, CaiT)."""

    final_norm = True

    def __init__(self, *, norm: nn.Module, dropout: float, d_model: int, init: float = 0.1):
        super().__init__(dropout=dropout)
        if not init > 0:
            raise ConfigError("model.norm_position_args.init", init, "a positive number (CaiT: 0.1 up to 18 layers, "
                              "1e-5 at 24, 1e-6 deeper)")
        self.norm = norm
        self.gamma = nn.Parameter(torch.full((d_model,), float(init)))  # (d_model,)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.gamma * self.dropout(sublayer(self.norm(x)))  # (B, T, d) + (d,) * (B, T, d)


def residual_branches(*, n_encoder_layers: int, n_decoder_layers: int, decoder_only: bool) -> int:
    """L, the residual branches of the whole network: 2 per encoder layer, 3 per decoder layer (2 in a decoder-only
    model's)."""
    if decoder_only:
        return 2 * n_decoder_layers
    return 2 * n_encoder_layers + 3 * n_decoder_layers


@register("norm_position", "fixup")
class Fixup(Residual):
    """No norm: x + Dropout(s * Sublayer(x + b)), scalar s from 1 and b from 0 (one bias per branch, not inside
    the FFN as the authors' code); each branch's last layer zeroed, its others scaled by L^-1/2
    (Zhang et al. 2019, Fixup)."""

    def __init__(self, *, dropout: float, n_encoder_layers: int, n_decoder_layers: int, decoder_only: bool):
        super().__init__(dropout=dropout)
        self.bias = nn.Parameter(torch.zeros(()))
        self.scale = nn.Parameter(torch.ones(()))
        L = residual_branches(n_encoder_layers=n_encoder_layers, n_decoder_layers=n_decoder_layers,
                              decoder_only=decoder_only)
        self.gain = L ** -0.5  # L^(-1/(2m-2)) with m = 2 layers in each branch

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.dropout(self.scale * sublayer(x + self.bias))

    def init_sublayer(self, sublayer: nn.Module) -> None:
        """Fixup's rules 1 and 2 on the branch's layers: the others times L^-1/2 (through the sub-layer's
        ``scale_values`` where it has one: an attention's value rows, queries and keys keeping their scale, as for
        DeepNorm; a mixture's experts), then the last zeroed: the sub-layer's ``zero_output`` where it has one, else
        the last of its linear layers in the order they were built (attention's W^O, the FFN's W2)."""
        linears = [m for m in sublayer.modules() if isinstance(m, nn.Linear)]
        scale_values = getattr(sublayer, "scale_values", None)
        zero_output = getattr(sublayer, "zero_output", None)
        with torch.no_grad():
            if scale_values is not None:
                scale_values(self.gain)
            else:
                for module in linears[:-1]:
                    module.weight.mul_(self.gain)
            if zero_output is not None:
                zero_output()
            elif linears:
                linears[-1].weight.zero_()

    def extra_repr(self) -> str:
        return f"gain={self.gain:.4g}"
