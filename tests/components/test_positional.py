"""Reference tests for positional encodings."""

from __future__ import annotations

import math

import pytest
import torch

from ablate.components.positional import LearnedPositional, RotaryPositional, SinusoidalPositional, sinusoid_table


def test_sinusoidal_matches_section_3_5_formula():
    d_model = 16
    table = sinusoid_table(50, d_model)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_is_added_with_offset_and_extrapolates():
    pe = SinusoidalPositional(d_model=8)
    x = torch.zeros(2, 3, 8)
    assert torch.allclose(pe(x, offset=5)[0], sinusoid_table(8, 8)[5:8])
    long = torch.zeros(1, 3000, 8)  # longer than the initial table
    assert torch.allclose(pe(long)[0, 2999], sinusoid_table(3000, 8)[2999], atol=1e-5)


def test_learned_adds_its_rows_and_rejects_too_long():
    pe = LearnedPositional(d_model=4, max_len=6)
    x = torch.zeros(1, 3, 4)
    assert torch.equal(pe(x, offset=2)[0], pe.embedding.weight[2:5])
    with pytest.raises(ValueError, match="max_len=6"):
        pe(torch.zeros(1, 7, 4))


def test_rope_preserves_norm_and_depends_only_on_relative_position():
    rope = RotaryPositional(d_k=8)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8, generator=g), torch.randn(1, 1, 1, 8, generator=g)
    assert torch.allclose(rope.rotate(q, offset=3).norm(), q.norm(), atol=1e-5)
    dots = [(rope.rotate(q, offset=m + 5) * rope.rotate(k, offset=m)).sum() for m in (0, 4, 11)]
    assert torch.allclose(torch.stack(dots), dots[0].expand(3), atol=1e-5)
    assert not torch.allclose((rope.rotate(q, 5) * rope.rotate(k, 0)).sum(), (rope.rotate(q, 6) * k).sum())


def test_partial_rope_rotates_the_first_fraction_of_d_k_by_the_formula_and_leaves_the_rest():
    """GPT-NeoX: the first r = fraction * d_k dimensions of each head, pairs (i, i + r/2) rotated by angle
    pos * base^(-2i/r); the other d_k - r dimensions pass through."""
    from ablate.components.positional import PartialRotary
    from ablate.errors import ConfigError

    rope = PartialRotary(d_k=16, fraction=0.25)
    assert rope.rotary == 4
    x = torch.randn(2, 3, 5, 16)
    out = rope.rotate(x, offset=2)
    assert torch.equal(out[..., 4:], x[..., 4:])
    for t in range(5):
        for i in range(2):
            angle = (t + 2) * 10000.0 ** (-2 * i / 4)
            a, b = x[..., t, i], x[..., t, i + 2]
            assert torch.allclose(out[..., t, i], a * math.cos(angle) - b * math.sin(angle), atol=1e-5)
            assert torch.allclose(out[..., t, i + 2], a * math.sin(angle) + b * math.cos(angle), atol=1e-5)
    with pytest.raises(ConfigError, match="positional_args.fraction"):
        PartialRotary(d_k=4, fraction=0.1)
