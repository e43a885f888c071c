"""Mixture-of-experts feed-forward networks: top-k routing (Shazeer et al. 2017; GShard, Lepikhin et al. 2021) and the
Switch Transformer's top-1 routing (Fedus et al. 2022), each with an expert capacity and a load-balancing loss.

Shapes are static throughout, so the model runs on the meta device and is counted like any other: a token's place in
its expert's queue is a cumulative sum over a one-hot, tokens past the capacity go to a discarded slot, the rest are
scattered into an (E, C, d_model) buffer, all experts run as two batched matrix products, and the outputs are
gathered back and weighted by the gates.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from ablate.components.auxiliary import add_aux_loss
from ablate.errors import ConfigError
from ablate.registry import register


def renormalised(top_p: torch.Tensor) -> torch.Tensor:
    """Gates (N, k): the k largest router probabilities divided by their sum (Shazeer et al. 2017; GShard)."""
    return top_p / top_p.sum(-1, keepdim=True)


def unnormalised(top_p: torch.Tensor) -> torch.Tensor:
    """Gates (N, k): the router probabilities themselves (Switch's top-1: y = p_i(x) E_i(x))."""
    return top_p


class MixtureOfExperts(nn.Module):
    """y = sum over x's top-k experts e of g_e(x) FFN_e(x), with FFN_e(x) = max(0, x W1_e + b1_e) W2_e + b2_e.

    Routing: p(x) = softmax(x W_r) over the E experts; a token goes to its k most probable experts, with gates g
    from ``gate`` (:func:`renormalised` or :func:`unnormalised`). Every token is routed, padding included (the
    model's padding mask acts in attention only), so padding takes expert slots and counts in the losses below.

    Capacity: in training, expert e takes at most C = ceil(capacity_factor * k * N / E) of the batch's N tokens
    (never more than N). Tokens queue by choice rank, then by place in the flattened (B, T) batch: every first
    choice before any second choice (GShard). A token past C gets 0 from that expert; the residual carries it.
    In eval mode C = N: nothing is dropped, a token's output depends on that token alone, and cached decoding
    equals the full pass.

    Auxiliary losses (:func:`ablate.components.auxiliary.add_aux_loss`), on every forward:
    ``load_balance`` = E sum_i f_i P_i (Fedus et al. 2022, eq. 4), f_i the fraction of tokens whose first choice
    is expert i, P_i the mean router probability of expert i (1 under uniform routing, the balance it pushes
    towards; E when every token goes to one expert with certainty), weighted by ``balance_weight``; ``router_z``
    = mean over tokens of logsumexp(x W_r)^2 (Zoph et al. 2022, ST-MoE), weighted by ``z_weight`` (logged even at
    weight 0).

    Args:
        d_model: model width.
        d_ff: each expert's inner size.
        n_experts: E.
        k: experts per token.
        capacity_factor: slots per expert in training, relative to an even share k N / E.
        balance_weight: weight of the load-balancing loss in the training objective.
        z_weight: weight of the router z-loss.
        gate: top-k probabilities (N, k) -> gates (N, k).
    """

    def __init__(self, *, d_model: int, d_ff: int, n_experts: int, k: int, capacity_factor: float,
                 balance_weight: float, z_weight: float, gate: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.n_experts, self.k, self.capacity_factor = n_experts, k, capacity_factor
        self.balance_weight, self.z_weight, self.gate = balance_weight, z_weight, gate
        self.router = nn.Linear(d_model, n_experts, bias=False)  # W_r
        self.w_1 = nn.Parameter(torch.empty(n_experts, d_model, d_ff))
        self.b_1 = nn.Parameter(torch.zeros(n_experts, d_ff))
        self.w_2 = nn.Parameter(torch.empty(n_experts, d_ff, d_model))
        self.b_2 = nn.Parameter(torch.zeros(n_experts, d_model))
        bound = math.sqrt(6.0 / (d_model + d_ff))  # Xavier-uniform for each expert's matrices, as for nn.Linear
        nn.init.uniform_(self.w_1, -bound, bound)
        nn.init.uniform_(self.w_2, -bound, bound)

    def capacity(self, tokens: int) -> int:
        """Slots per expert for a batch of ``tokens`` tokens: ceil(capacity_factor k N / E) in training, at most
        N; N in eval mode (no limit)."""
        limit = math.ceil(self.capacity_factor * self.k * tokens / self.n_experts) if self.training else tokens
        return min(tokens, limit)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        N, E, k = B * T, self.n_experts, self.k
        C = self.capacity(N)
        tokens = x.reshape(N, d)  # (N, d)
        logits = self.router(tokens)  # (N, E)
        probs = logits.softmax(-1, dtype=torch.float32)  # (N, E)
        top_p, expert = probs.topk(k, dim=-1)  # (N, k)
        gates = self.gate(top_p)  # (N, k)

        # Dispatch: choice-major order (all first choices, then all second choices), each token's place in its
        # expert's queue, and its slot in the flattened (E, C) buffer; slot E*C takes the dropped tokens.
        choice = expert.t().reshape(k * N)  # (kN,)
        one_hot = choice[:, None] == torch.arange(E, device=x.device)  # (kN, E)
        place = ((one_hot.cumsum(0) - 1) * one_hot).sum(-1)  # (kN,)
        slot = torch.where(place < C, choice * C + place, E * C)  # (kN,)
        buffer = tokens.new_zeros(E * C + 1, d).index_add(0, slot, tokens.repeat(k, 1))  # (E*C + 1, d)
        h = buffer[:-1].view(E, C, d)  # (E, C, d)

        h = torch.relu(torch.baddbmm(self.b_1[:, None], h, self.w_1))  # (E, C, d_ff)
        out = torch.baddbmm(self.b_2[:, None], h, self.w_2)  # (E, C, d)

        # Combine: a dropped token reads the zero row; the k outputs are weighted by the gates and summed.
        out = torch.cat([out.reshape(E * C, d), out.new_zeros(1, d)])  # (E*C + 1, d)
        y = out.index_select(0, slot).view(k, N, d)  # (k, N, d)
        y = (y * gates.t().to(y.dtype)[..., None]).sum(0)  # (N, d)
        self.add_losses(logits, probs, expert[:, 0])
        return y.view(B, T, d)  # (B, T, d)

    def add_losses(self, logits: torch.Tensor, probs: torch.Tensor, first: torch.Tensor) -> None:
        """Contribute the load-balancing loss and the router z-loss (see the class docstring).

        Args:
            logits: router logits (N, E).
            probs: router probabilities (N, E).
            first: each token's first choice (N,).
        """
        E = self.n_experts
        f = (first[:, None] == torch.arange(E, device=first.device)).float().mean(0)  # (E,): top-1 fractions
        P = probs.mean(0)  # (E,): mean router probabilities
        add_aux_loss("load_balance", E * (f * P).sum(), self.balance_weight)
        add_aux_loss("router_z", torch.logsumexp(logits.float(), dim=-1).pow(2).mean(), self.z_weight)

    def flops_per_token(self, length: int) -> float:
        """The experts' two batched products over E x C slots, per token of a batch of one ``length``-long sequence
        (the router is an nn.Linear, counted on its own); the capacity is that of ``length`` tokens."""
        E, d_model, d_ff = self.w_1.shape
        return 2.0 * E * self.capacity(length) * (2 * d_model * d_ff) / length

    def scale_values(self, gain: float) -> None:
        """Multiply every expert's W1 and W2 by ``gain`` (DeepNorm's beta for FFN weights); the router keeps its."""
        with torch.no_grad():
            self.w_1.mul_(gain)
            self.w_2.mul_(gain)

    def zero_output(self) -> None:
        """Zero every expert's last layer, W2 and its bias (Fixup's rule for a branch's last layer; not the router)."""
        with torch.no_grad():
            self.w_2.zero_()
            self.b_2.zero_()

    def extra_repr(self) -> str:
        return (f"n_experts={self.n_experts}, k={self.k}, capacity_factor={self.capacity_factor}, "
                f"gate={self.gate.__name__}")


def _check(*, n_experts: int, k: int, capacity_factor: float, balance_weight: float, z_weight: float) -> None:
    if n_experts < 1:
        raise ConfigError("model.ffn_args.n_experts", n_experts, "at least 1")
    if not 1 <= k <= n_experts:
        raise ConfigError("model.ffn_args.k", k, f"between 1 and n_experts ({n_experts})")
    if not capacity_factor > 0:
        raise ConfigError("model.ffn_args.capacity_factor", capacity_factor, "a number above 0")
    for key, value in (("balance_weight", balance_weight), ("z_weight", z_weight)):
        if not value >= 0:
            raise ConfigError(f"model.ffn_args.{key}", value, "a number at least 0")


@register("ffn", "moe")
def moe(*, d_model: int, d_ff: int, n_experts: int = 8, k: int = 2, capacity_factor: float = 1.25,
        balance_weight: float = 0.01, z_weight: float = 0.0) -> MixtureOfExperts:
    """Mixture of ReLU FFN experts, top-k routing, renormalised gates, capacity (Shazeer et al. 2017; GShard 2021).

    With k=1 the gate is the router probability itself, as in Switch: renormalising a single gate would make it 1
    and leave the router no gradient from the tokens' loss.
    """
    _check(n_experts=n_experts, k=k, capacity_factor=capacity_factor, balance_weight=balance_weight, z_weight=z_weight)
    return MixtureOfExperts(d_model=d_model, d_ff=d_ff, n_experts=n_experts, k=k, capacity_factor=capacity_factor,
                            balance_weight=balance_weight, z_weight=z_weight,
                            gate=renormalised if k > 1 else unnormalised)


@register("ffn", "switch")
def switch(*, d_model: int, d_ff: int, n_experts: int = 8, capacity_factor: float = 1.25,
           balance_weight: float = 0.01, z_weight: float = 0.0) -> MixtureOfExperts:
    """Switch Transformer FFN: top-1 routing, gate p_i(x), capacity and load-balancing loss (Fedus et al. 2022)."""
    _check(n_experts=n_experts, k=1, capacity_factor=capacity_factor, balance_weight=balance_weight, z_weight=z_weight)
    return MixtureOfExperts(d_model=d_model, d_ff=d_ff, n_experts=n_experts, k=1, capacity_factor=capacity_factor,
                            balance_weight=balance_weight, z_weight=z_weight, gate=unnormalised)
