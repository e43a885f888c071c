"""K models of one architecture trained as one: their parameters stacked on a leading member axis, every member's
forward run at once by ``torch.func.vmap`` over ``functional_call`` (torch.func's model-ensembling recipe).

Each member keeps what makes it its own run: its initialisation (its solo model, built from its seed, is what gets
stacked), its batches (a member axis on every input) and its dropout masks (``randomness="different"``: each member
draws its own). Parameters are disjoint between members, so the gradient of the sum of the members' losses is, for
each member, the gradient of its own loss: one backward trains them all, and an elementwise optimiser (Adam) over
the stacked tensors is each member's own optimiser.

Why vmap rather than rewriting every component as a batched one (HFTA's horizontal fusion): vmap fuses every
registered variant, the users' too, without a second implementation of each; :mod:`ablate.train.fusable` says which
do (the registry-generated test in ``tests/train/test_fusable.py`` checks each member against its solo model).
``benchmarks/fuse.py`` measures what it buys.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap


def _mangle(name: str) -> str:
    return name.replace(".", "__")  # a ParameterDict key may not hold a dot


class FusedModel(nn.Module):
    """K members of one architecture, stacked: every parameter and buffer gets a leading member axis (K, ...).

    Args:
        members: K solo models with the same structure (built from one config and K seeds).
    """

    def __init__(self, members: list[nn.Module]):
        super().__init__()
        if not members:
            raise ValueError("a fused model needs at least one member")
        self.k = len(members)
        params, buffers = stack_module_state(members)
        self.names = list(params)  # the solo model's parameter names, tied ones once
        self.stacked = nn.ParameterDict({_mangle(n): nn.Parameter(p) for n, p in params.items()})
        for name, b in buffers.items():
            self.register_buffer(_mangle(name), b, persistent=True)
        self.buffer_names = list(buffers)
        template = members[0]
        self._aliases = _aliases(template)  # every state_dict key -> the stacked tensor it is
        self.__dict__["template"] = copy.deepcopy(template).to("meta")  # the structure functional_call runs

    def params(self) -> dict[str, torch.Tensor]:
        return {n: self.stacked[_mangle(n)] for n in self.names}

    def buffers_by_name(self) -> dict[str, torch.Tensor]:
        return {n: getattr(self, _mangle(n)) for n in self.buffer_names}

    def vmap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn(model, *member_args)`` run for every member at once, where ``model(**inputs)`` is the member's solo
        model's forward. Every argument and result carries the member axis K first."""
        def one(params: dict, buffers: dict, *args: Any) -> Any:
            return fn(lambda **inputs: functional_call(self.template, (params, buffers), args=(), kwargs=inputs),
                      *args)
        batched = vmap(one, in_dims=0, randomness="different")

        def run(*args: Any) -> Any:
            # The members run in this module's mode (dropout, a router's capacity). Set at every call: Lightning
            # restores modes after validation by setting each submodule's ``training``, which never reaches the
            # template (not a submodule, so that its meta weights are not the module's).
            if self.template.training != self.training:
                self.template.train(self.training)
            return batched(self.params(), self.buffers_by_name(), *args)

        return run

    def member_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Member ``k``'s weights as its solo model's ``state_dict()`` (tied weights under each of their keys)."""
        tensors = {**self.params(), **self.buffers_by_name()}
        return {key: tensors[name][k].detach().clone() for key, name in self._aliases.items()}

    @torch.no_grad()
    def load_member(self, k: int, model: nn.Module) -> nn.Module:
        """Member ``k`` copied into ``model``, a solo model of the members' structure (built from their config):
        every parameter and buffer, non-persistent ones too. Returns ``model``, now member ``k``'s solo model."""
        for name, stacked in self.params().items():  # tied weights: under their first name, as stacked
            model.get_parameter(name).copy_(stacked[k])
        for name, stacked in self.buffers_by_name().items():
            model.get_buffer(name).copy_(stacked[k])
        return model


def _aliases(model: nn.Module) -> dict[str, str]:
    """Every key of ``model.state_dict()`` -> the name of the parameter or buffer it is (tied weights: the first
    name, as ``named_parameters`` and ``stack_module_state`` give it)."""
    first: dict[int, str] = {}
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        first.setdefault(id(t), name)
    everything = dict(model.named_parameters(remove_duplicate=False))
    everything.update(model.named_buffers(remove_duplicate=False))
    keys = model.state_dict(keep_vars=True)
    return {key: first[id(everything[key])] for key in keys}
