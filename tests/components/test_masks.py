"""Mask variants: True = may attend; queries are the last T_q of T_k positions."""

from __future__ import annotations

import pytest
import torch

from ablate.components.masks import CausalMask, NoMask, PrefixLMMask, SlidingWindowMask

CPU = torch.device("cpu")


def test_causal_is_lower_triangular_and_aligned_for_incremental_decoding():
    assert torch.equal(CausalMask()(4, 4, CPU), torch.ones(4, 4).tril().bool())
    assert torch.equal(CausalMask()(1, 4, CPU), torch.ones(1, 4).bool())  # the newest query sees everything


def test_none_lets_every_position_attend():
    assert NoMask()(4, 4, CPU) is None


def test_sliding_window_keeps_the_last_window_positions():
    m = SlidingWindowMask(window=2)(4, 4, CPU)
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]).bool()
    assert torch.equal(m, expected)


def test_prefix_lm_is_bidirectional_over_the_prefix():
    m = PrefixLMMask(prefix_len=2)(4, 4, CPU)
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool()
    assert torch.equal(m, expected)


# Generated from the registry: what every mask declares agrees with what it does.
from ablate import registry  # noqa: E402
from ablate.components.masks import Mask  # noqa: E402

MASKS = {name: registry.create("mask", name, {}, {"window": 3} if name == "sliding_window" else
                               {"prefix_len": 3} if name == "prefix_lm" else {}) for name in registry.names("mask")}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_looks_ahead_is_declared_truthfully(name):
    mask = MASKS[name]
    allowed = mask(9, 9, CPU)
    probed = allowed is None or bool(allowed.triu(1).any())
    assert mask.looks_ahead == probed


@pytest.mark.parametrize("name", sorted(MASKS))
def test_declared_scored_positions_equal_the_generic_reachability(name):
    """A mask's own ``unseen_labels`` (a closed form, where it has one) agrees with the base class's graph search."""
    mask = MASKS[name]
    for length in (1, 2, 3, 4, 9):
        assert torch.equal(mask.unseen_labels(length, CPU), Mask.unseen_labels(mask, length, CPU)), length


def _reaches(allowed: torch.Tensor, query: int, key: int, layers: int) -> bool:
    """Brute force: can ``query``'s output after ``layers`` layers depend on ``key``'s input?"""
    frontier = {query}
    for _ in range(layers):
        frontier |= {j for i in frontier for j in range(allowed.size(1)) if allowed[i, j]}
    return key in frontier


@pytest.mark.parametrize("name", sorted(MASKS))
def test_a_scored_position_never_reads_its_label_at_any_depth(name):
    mask = MASKS[name]
    T = 8
    allowed = mask(T, T, CPU)
    allowed = torch.ones(T, T, dtype=torch.bool) if allowed is None else allowed
    scored = mask.scored(T, CPU)
    for t in range(T - 1):
        sees = _reaches(allowed, t, t + 1, layers=T)
        if not mask.leaks_labels:
            assert bool(scored[t]) == (not sees), (name, t)
        else:
            assert scored[t]  # a declared leak scores everything; the report marks it


def test_prefix_lm_scores_only_the_positions_after_the_prefix():
    """T5's prefix-LM objective: the loss covers the targets, whose first is predicted at position prefix_len - 1."""
    assert PrefixLMMask(prefix_len=3).scored(6, CPU).tolist() == [False, False, True, True, True, True]
    assert CausalMask().scored(4, CPU).all() and NoMask().scored(4, CPU).all() and NoMask.leaks_labels
