"""Auxiliary losses a component contributes while the model runs: a router's load balance and z-loss, a halting
unit's ponder cost.

The contract:

- **What a component returns.** Inside its ``forward``, a component calls :func:`add_aux_loss` with a name
  (``load_balance``), a scalar tensor (its unweighted value, averaged over what the module saw) and the weight its
  own arguments set (``model.ffn_args.balance_weight``). A module that runs several times in one forward (a layer
  shared across a stack) adds one term per run.
- **Where it is added.** The training step runs the model inside :func:`collect_aux_losses` and minimises the
  token loss plus the sum of weight x value over every term (:func:`weighted_total`).
- **How it is logged.** Each name's value, summed over the terms that carry it (one per layer), unweighted:
  ``train/aux/<name>`` at every logged step, ``val/aux/<name>`` averaged over validation. Never in ``train/loss``
  (the label-smoothed token loss), ``val/loss`` or ``val/ppl``, so variants with and without an auxiliary loss
  compare on the same footing.

Outside a collection (decoding, evaluation, a plain ``model(...)`` call) nothing is kept.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator

import torch


@dataclass(frozen=True)
class AuxLoss:
    """One term: its name, its unweighted value (a scalar tensor, with its graph) and its weight in the objective."""

    name: str
    value: torch.Tensor
    weight: float


_ACTIVE: ContextVar[list[AuxLoss] | None] = ContextVar("ablate_aux_losses", default=None)


def add_aux_loss(name: str, value: torch.Tensor, weight: float) -> None:
    """Contribute a term to the collection in progress, if any (see the module docstring)."""
    active = _ACTIVE.get()
    if active is not None:
        active.append(AuxLoss(name, value, float(weight)))


@contextmanager
def collect_aux_losses() -> Iterator[list[AuxLoss]]:
    """Collect the terms every component adds while the block runs (nested collections each keep their own)."""
    terms: list[AuxLoss] = []
    token = _ACTIVE.set(terms)
    try:
        yield terms
    finally:
        _ACTIVE.reset(token)


def weighted_total(terms: list[AuxLoss]) -> torch.Tensor | float:
    """The sum of weight x value over the terms: what the training objective adds (0.0 without terms)."""
    return sum((t.weight * t.value for t in terms), 0.0)


def by_name(terms: list[AuxLoss]) -> dict[str, torch.Tensor]:
    """Each name's unweighted value, summed over its terms (one per layer that added it)."""
    out: dict[str, torch.Tensor] = {}
    for t in terms:
        out[t.name] = out[t.name] + t.value if t.name in out else t.value
    return out
