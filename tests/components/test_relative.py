"""Shaw et al. 2018's relative position representations, against their equation by brute force."""

from __future__ import annotations

import pytest
import torch

import ablate
from ablate.components.relative import RelativeKeyTable, clipped_distances
from ablate.errors import ConfigError
from tests.conftest import TINY


def test_the_query_bias_is_q_dot_the_clipped_distance_vector():
    torch.manual_seed(0)
    table = RelativeKeyTable(d_k=4, n_heads=2, clip=2)
    q = torch.randn(3, 2, 4, 4)  # (B, h, T_q, d_k): the last 4 of 6 positions
    bias = table.query_bias(q, 6)  # (B, h, T_q, T_k)
    for i in range(4):
        for j in range(6):
            distance = max(-2, min(2, j - (i + 2)))
            assert torch.allclose(bias[:, :, i, j], q[:, :, i] @ table.table[distance + 2], atol=1e-6)
    assert clipped_distances(1, 4, 2, torch.device("cpu")).tolist() == [[0, 0, 1, 2]]


def test_attention_scores_gain_q_a_over_sqrt_d_k():
    """e_ij = q_i (k_j + a_ij)^T / sqrt(d_k): with every table vector set to the same a, the attention equals plain
    attention over keys shifted by a."""
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + ["model.positional=relative", "model.dropout=0.0"])
    model = ablate.build_model(cfg).eval()
    attn = model.encoder.layers[0].self_attn
    a = torch.randn(8)
    attn.positional.table.data[:] = a  # every distance the same vector
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        out = attn(x, None)
        q, k, v = attn.w_qkv(x).split([32, 32, 32], dim=-1)
        heads = lambda t: t.view(2, 5, 4, 8).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q), heads(k) + a, heads(v)
        weights = ((q @ k.transpose(-2, -1)) / 8**0.5).softmax(-1)
        expected = attn.w_o((weights @ v).transpose(1, 2).reshape(2, 5, 32))
    assert torch.allclose(out, expected, atol=1e-5)
    assert attn.positional is not model.encoder.layers[1].self_attn.positional  # a table per layer
    with pytest.raises(ConfigError, match="positional_args.clip"):
        ablate.build_model(ablate.load_config(None, TINY + ["model.positional=relative",
                                                           "model.positional_args.clip=0"]))
