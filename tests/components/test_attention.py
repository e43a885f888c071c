"""Attention variants against their definitions: GQA, MQA, QK-norm, and score biases joined with boolean masks."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ablate.components.attention import GroupedQueryAttention, MultiHeadAttention, QKNormAttention
from ablate.components.position_bias import ALiBi
from ablate.errors import ConfigError

DIMS = dict(d_model=16, n_heads=4, d_k=4, d_v=4)


def _x(T: int = 5) -> torch.Tensor:
    return torch.randn(2, T, 16, generator=torch.Generator().manual_seed(0))


def _reference(q, k, v, mask=None, bias=None):
    """softmax(q k^T / sqrt(d_k) + bias, masked) v, written out."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("cross", [False, True])
def test_gqa_with_as_many_kv_heads_as_heads_is_mha(cross):
    torch.manual_seed(0)
    mha = MultiHeadAttention(**DIMS, cross=cross)
    gqa = GroupedQueryAttention(**DIMS, cross=cross, n_kv_heads=4)
    gqa.load_state_dict(mha.state_dict())
    x, memory = _x(), _x(7)
    kwargs = {"memory": memory} if cross else {}
    assert torch.allclose(mha(x, None, **kwargs), gqa(x, None, **kwargs))


def test_mqa_shares_one_key_and_value_head_across_query_heads():
    torch.manual_seed(0)
    mqa = GroupedQueryAttention(**DIMS, n_kv_heads=1)
    assert mqa.w_qkv.out_features == 4 * 4 + 1 * (4 + 4)  # h d_k queries, one d_k key and one d_v value
    x = _x()
    q, k, v = mqa.w_qkv(x).split([16, 4, 4], dim=-1)
    q = q.view(2, 5, 4, 4).transpose(1, 2)  # (B, h, T, d_k)
    k, v = k[:, None], v[:, None]  # (B, 1, T, d): the one head, seen by every query head
    expected = mqa.w_o(_reference(q, k.expand(2, 4, 5, 4), v.expand(2, 4, 5, 4)).transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(mqa(x, None), expected, atol=1e-6)


def test_gqa_refuses_a_kv_head_count_that_does_not_divide_the_heads():
    with pytest.raises(ConfigError, match="n_kv_heads=3.*divisor of model.n_heads=4"):
        GroupedQueryAttention(**DIMS, n_kv_heads=3)


def test_qk_norm_layer_normalises_each_head_s_queries_and_keys():
    torch.manual_seed(0)
    attn = QKNormAttention(**DIMS)
    x = _x()
    q, k, v = attn.w_qkv(x).split([16, 16, 16], dim=-1)
    heads = [t.view(2, 5, 4, 4).transpose(1, 2) for t in (q, k, v)]
    q, k, v = F.layer_norm(heads[0], (4,), eps=1e-6), F.layer_norm(heads[1], (4,), eps=1e-6), heads[2]
    expected = attn.w_o(_reference(q, k, v).transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(attn(x, None), expected, atol=1e-5)


def test_a_score_bias_joins_the_boolean_mask_without_changing_it():
    """True = may attend still decides which keys count; the bias only reweighs the allowed ones."""
    torch.manual_seed(0)
    alibi = ALiBi(n_heads=4)
    attn = MultiHeadAttention(**DIMS, positional=alibi)
    x = _x()
    causal = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)
    q, k, v = (t.view(2, 5, 4, 4).transpose(1, 2) for t in attn.w_qkv(x).split([16, 16, 16], dim=-1))
    expected = attn.w_o(_reference(q, k, v, causal, alibi.score_bias(5, 5)).transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(attn(x, causal), expected, atol=1e-6)
    attn.keep_weights = True  # the explicit softmax path gives the same, and zero weight where the mask says no
    assert torch.allclose(attn(x, causal), expected, atol=1e-6)
    assert (attn.weights[..., ~causal[0, 0]] == 0).all()
