"""The Universal Transformer's depth (Dehghani et al. 2019): one layer applied again and again, each position
halting on its own by adaptive computation time (Graves 2016), with a ponder cost.

At step t (of at most N, ``model.n_layers``) a timestep signal is added to every position's state, a halting unit
gives p_t = sigmoid(w . s_t + b), and a position that is still running accumulates the layer's output with weight
p_t, or with its remainder 1 - (sum of its earlier p) at the step its sum would pass ``threshold`` (and at the last
step): the output is ``s_t w_t + out (1 - w_t)``, step by step, as in the paper's code (tensor2tensor). Every step
runs for every position (a halted position's weight is 0), so a position's output depends on the positions its mask
lets it see, whichever others are still running, and cached decoding equals the full pass (one cache per step).
The ponder cost, the mean over positions (padding included) of N(t) + R(t), the steps taken plus the remainder, is
an auxiliary loss (``ponder``) with weight ``ponder_weight``.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from ablate.components.auxiliary import add_aux_loss
from ablate.components.positional import sinusoid_buffer
from ablate.components.sharing import LayerSharing, MakeLayer, ShareAll, layer_args
from ablate.errors import ConfigError
from ablate.registry import register


class HaltingStack(nn.Module):
    """N applications of one layer (``layers``: the same module N times, one cache each), halted per position by ACT."""

    def __init__(self, layers: list[nn.Module], final_norm: nn.Module, *, d_model: int, threshold: float,
                 ponder_weight: float, halting_bias: float):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm
        self.halting = nn.Linear(d_model, 1, bias=False)
        self.halting_bias = nn.Parameter(torch.tensor(float(halting_bias)))  # kept apart: initialisation zeroes biases
        self.register_buffer("timing", sinusoid_buffer(len(layers), d_model),
                             persistent=False)  # (N, d_model): the timestep signal
        self.threshold, self.ponder_weight = threshold, ponder_weight

    def forward(self, x: torch.Tensor, *args: Any, caches: Sequence[Any] | None = None) -> torch.Tensor:
        """x (B, T, d_model) -> (B, T, d_model); ``args`` and ``caches`` as
        :class:`ablate.components.sharing.Stack`'s."""
        halted = x.new_zeros(x.shape[:2])  # (B, T): the sum of p so far
        remainders, n_updates, done = torch.zeros_like(halted), torch.zeros_like(halted), torch.zeros_like(halted)
        state, out = x, torch.zeros_like(x)
        last = len(self.layers) - 1
        for t, layer in enumerate(self.layers):
            state = state + self.timing[t].to(state.dtype)  # (B, T, d)
            p = torch.sigmoid(self.halting(state).squeeze(-1) + self.halting_bias)  # (B, T)
            running = 1 - done  # a flag, not halted < 1: the sum plus its remainder may round to just below 1
            crossing = ((halted + p * running) > self.threshold).to(p.dtype)
            new_halted = running if t == last else crossing * running  # the last step halts every position
            running = running - new_halted
            halted = halted + p * running
            remainders = remainders + new_halted * (1 - halted)
            done = done + new_halted
            n_updates = n_updates + running + new_halted
            w = (p * running + new_halted * remainders).unsqueeze(-1)  # (B, T, 1)
            state = layer(state, *layer_args(args, t), cache=caches[t] if caches is not None else None)
            out = state * w + out * (1 - w)
        add_aux_loss("ponder", (n_updates + remainders).mean(), self.ponder_weight)
        return self.final_norm(out)

    def flops_per_token(self, length: int) -> float:
        """The halting unit runs at every step but appears once among the modules: its N - 1 further runs."""
        return 2.0 * self.halting.in_features * (len(self.layers) - 1)


@register("sharing", "universal")
class UniversalTransformer(LayerSharing):
    """One layer applied up to N times, each position halting by adaptive computation time, with a ponder cost
    (Dehghani et al. 2019; Graves 2016)."""

    def __init__(self, *, d_model: int, threshold: float = 0.99, ponder_weight: float = 0.01,
                 halting_bias: float = 1.0):
        if not 0 < threshold <= 1:
            raise ConfigError("model.sharing_args.threshold", threshold, "a number in (0, 1]: 1 - epsilon of ACT")
        if ponder_weight < 0:
            raise ConfigError("model.sharing_args.ponder_weight", ponder_weight, "a non-negative weight")
        self.d_model, self.threshold, self.ponder_weight = d_model, threshold, ponder_weight
        self.halting_bias = halting_bias

    def layers(self, n: int, make: MakeLayer) -> list[nn.Module]:
        return ShareAll().layers(n, make)

    def stack(self, layers: list[nn.Module], final_norm: nn.Module) -> nn.Module:
        return HaltingStack(layers, final_norm, d_model=self.d_model, threshold=self.threshold,
                            ponder_weight=self.ponder_weight, halting_bias=self.halting_bias)
