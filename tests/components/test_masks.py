"""Mask variants: True = may attend; queries are the last T_q of T_k positions."""

from __future__ import annotations

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
