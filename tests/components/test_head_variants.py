"""Talking heads, gated and differential attention against their papers' equations, written out on tiny cases."""

from __future__ import annotations

import math

import pytest
import torch

import ablate
from ablate.components.attention import MultiHeadAttention
from ablate.components.head_variants import DifferentialAttention, GatedAttention, TalkingHeadsAttention, lambda_init
from ablate.components.position_bias import ALiBi
from ablate.components.positional import RotaryPositional
from ablate.errors import ConfigError
from tests.conftest import TINY

DIMS = dict(d_model=16, n_heads=4, d_k=4, d_v=4)
CAUSAL = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)


def _x(T: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(2, T, 16, generator=torch.Generator().manual_seed(seed))


def _qkv(attn, x: torch.Tensor, d_k: int = 4, d_v: int = 4) -> tuple[torch.Tensor, ...]:
    """Each head's queries, keys and values (B, h, T, d) from the fused projection, by hand."""
    B, T, _ = x.shape
    q, k, v = attn.w_qkv(x).split([4 * d_k, 4 * d_k, 4 * d_v], dim=-1)
    return tuple(t.view(B, T, 4, -1).transpose(1, 2) for t in (q, k, v))


def _concat(heads: torch.Tensor) -> torch.Tensor:
    B, h, T, d = heads.shape
    return heads.transpose(1, 2).reshape(B, T, h * d)


def _masked_softmax(scores, mask=None, bias=None):
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1)


# Talking heads (Shazeer et al. 2020)


@pytest.mark.parametrize("cross", [False, True])
def test_talking_heads_with_identity_projections_is_multi_head_attention(cross):
    torch.manual_seed(0)
    mha = MultiHeadAttention(**DIMS, cross=cross)
    talking = TalkingHeadsAttention(**DIMS, cross=cross, init="identity")
    assert torch.equal(talking.p_l, torch.eye(4)) and torch.equal(talking.p_w, torch.eye(4))
    talking.load_state_dict(mha.state_dict(), strict=False)  # every weight but P_l, P_w
    x, memory = _x(), _x(7, seed=1)
    kwargs = {"memory": memory} if cross else {}
    mask = None if cross else CAUSAL
    torch.testing.assert_close(talking(x, mask, **kwargs), mha(x, mask, **kwargs), atol=1e-6, rtol=0)


def test_talking_heads_with_random_projections_follow_the_paper_s_equations():
    """J = Q K^T / sqrt(d_k); L = J P_l (over heads); W = softmax(L + bias, masked); U = W P_w; O = U V; Y = O W^O."""
    torch.manual_seed(0)
    alibi = ALiBi(n_heads=4)
    attn = TalkingHeadsAttention(**DIMS, positional=alibi)
    x = _x()
    q, k, v = _qkv(attn, x)
    J = q @ k.transpose(-2, -1) / math.sqrt(4)  # (B, h, T, T)
    P_l, P_w = attn.p_l.detach(), attn.p_w.detach()
    L = torch.stack([sum(J[:, i] * P_l[i, j] for i in range(4)) for j in range(4)], dim=1)  # head j of L
    W = _masked_softmax(L, CAUSAL, alibi.score_bias(5, 5))
    U = torch.stack([sum(W[:, i] * P_w[i, j] for i in range(4)) for j in range(4)], dim=1)
    expected = attn.w_o(_concat(U @ v))
    torch.testing.assert_close(attn(x, CAUSAL), expected, atol=1e-5, rtol=0)


def test_talking_heads_start_random_as_in_the_paper():
    """N(0, 1/h) truncated at 2 standard deviations (Mesh TensorFlow's initialiser): not the identity."""
    torch.manual_seed(0)
    attn = TalkingHeadsAttention(d_model=64, n_heads=64, d_k=1, d_v=1)
    for p in (attn.p_l, attn.p_w):
        assert p.abs().max() <= 2 / 8
        assert 0.8 * 0.88 / 8 < p.std() < 1.2 * 0.88 / 8  # a 2-sigma truncated normal's std is 0.88 sigma
        assert not torch.allclose(p, torch.eye(64), atol=0.1)


def test_talking_heads_give_a_query_with_no_key_zero_weights_and_finite_gradients():
    """Padding under a sliding window can leave a query nothing to attend to: SDPA gives it zeros, so do these."""
    torch.manual_seed(0)
    attn = TalkingHeadsAttention(**DIMS)
    x = _x().requires_grad_()
    mask = CAUSAL.clone()
    mask[..., 3, :] = False  # query 3 sees nothing
    heads = attn.self_heads(x, mask, None)  # (B, h, T, d_v)
    assert (heads[:, :, 3] == 0).all()
    heads.sum().backward()
    assert all(torch.isfinite(g).all() for g in (x.grad, attn.p_l.grad, attn.p_w.grad))


def test_talking_heads_refuse_an_unknown_init():
    with pytest.raises(ConfigError, match="model.attention_args.init"):
        TalkingHeadsAttention(**DIMS, init="zeros")


# Gated attention (Qiu et al. 2025)


def test_a_gate_with_zero_weights_is_sigmoid_of_its_bias():
    torch.manual_seed(0)
    mha, gated = MultiHeadAttention(**DIMS), GatedAttention(**DIMS)
    gated.load_state_dict(mha.state_dict(), strict=False)
    b = torch.linspace(-3, 3, 16)
    with torch.no_grad():
        gated.w_theta.weight.zero_()
        gated.w_theta.bias.copy_(b)
    x = _x()
    heads = mha.self_heads(x, CAUSAL, None)  # Y (B, h, T, d_v): the gate leaves attention itself alone
    expected = mha.w_o(_concat(heads) * torch.sigmoid(b))  # every position and sample gated by sigmoid(b)
    torch.testing.assert_close(gated(x, CAUSAL), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("cross", [False, True])
def test_the_gate_is_sigmoid_of_the_layer_input_per_head_and_channel(cross):
    """Y' = Y * sigmoid(X W_theta) before W^O, W_theta: d_model -> h d_v; for cross-attention X is the decoder's."""
    torch.manual_seed(0)
    gated = GatedAttention(**DIMS, cross=cross)
    assert gated.w_theta.in_features == 16 and gated.w_theta.out_features == 4 * 4
    x, memory = _x(), _x(7, seed=1)
    kwargs = {"memory": memory} if cross else {}
    heads = gated.cross_heads(x, None, None, memory) if cross else gated.self_heads(x, None, None)
    gate = torch.sigmoid(x @ gated.w_theta.weight.T + gated.w_theta.bias)  # (B, T, h*d_v)
    expected = _concat(heads) * gate @ gated.w_o.weight.T + gated.w_o.bias
    torch.testing.assert_close(gated(x, None, **kwargs), expected, atol=1e-6, rtol=0)


# Differential attention (Ye et al. 2024)


@pytest.mark.parametrize("layer", range(6))
def test_lambda_init_follows_the_paper_for_each_layer(layer):
    paper_l = layer + 1  # the paper counts layers from 1
    assert lambda_init(layer) == pytest.approx(0.8 - 0.6 * math.exp(-0.3 * (paper_l - 1)), abs=1e-15)
    assert DifferentialAttention(**DIMS, layer=layer).lambda_init == lambda_init(layer)


def test_the_assembler_gives_each_layer_its_own_lambda_init():
    cfg = ablate.load_config(None, TINY + ["model.attention=differential", "model.n_layers=3"])
    model = ablate.build_model(cfg)
    for stack in (model.encoder, model.decoder):
        for i, layer in enumerate(stack.layers):
            assert layer.self_attn.lambda_init == pytest.approx(0.8 - 0.6 * math.exp(-0.3 * i))
    assert [layer.cross_attn.lambda_init for layer in model.decoder.layers] == [lambda_init(i) for i in range(3)]


def _differential_by_hand(attn: DifferentialAttention, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(softmax(Q1 K1^T / sqrt(d)) - lambda softmax(Q2 K2^T / sqrt(d))) V with d = d_k/2, each head RMS-normalised,
    times (1 - lambda_init)."""
    q, k, v = _qkv(attn, x, d_k=8)
    Q1, Q2, K1, K2 = q[..., 0::2], q[..., 1::2], k[..., 0::2], k[..., 1::2]  # each head's halves (d = 4)
    A1 = _masked_softmax(Q1 @ K1.transpose(-2, -1) / math.sqrt(4), mask)
    A2 = _masked_softmax(Q2 @ K2.transpose(-2, -1) / math.sqrt(4), mask)
    lam = (math.exp(float(attn.lambda_q1.detach() @ attn.lambda_k1.detach()))
           - math.exp(float(attn.lambda_q2.detach() @ attn.lambda_k2.detach()))
           + 0.8 - 0.6 * math.exp(-0.3 * 2))  # layer index 2
    heads = (A1 - lam * A2) @ v  # (B, h, T, d_v)
    normed = heads / torch.sqrt(heads.pow(2).mean(-1, keepdim=True) + 1e-5) * attn.head_norm.weight
    return attn.w_o(_concat(normed * (1 - attn.lambda_init)))


def test_differential_attention_follows_the_paper_s_equation():
    torch.manual_seed(0)
    attn = DifferentialAttention(d_model=16, n_heads=4, d_k=8, d_v=4, layer=2)
    with torch.no_grad():
        attn.head_norm.weight.uniform_(0.5, 1.5)  # a gain other than 1, so that it is tested too
    x = _x()
    expected = _differential_by_hand(attn, x, CAUSAL)
    torch.testing.assert_close(attn(x, CAUSAL), expected, atol=1e-5, rtol=0)
    attn.keep_weights = True  # the explicit path: the same, and it keeps A1 - lambda A2
    torch.testing.assert_close(attn(x, CAUSAL), expected, atol=1e-5, rtol=0)
    assert attn.weights.shape == (2, 4, 5, 5) and (attn.weights[..., ~CAUSAL[0, 0]] == 0).all()


def test_differential_attention_refuses_an_odd_d_k():
    with pytest.raises(ConfigError, match="model.d_k"):
        DifferentialAttention(d_model=12, n_heads=4, d_k=3, d_v=3)


def test_each_differential_map_keeps_rope_s_relative_positions():
    """RoPE rotates pairs (i, i + d_k/2): the halves (even and odd dimensions) each hold whole pairs, so each map's
    scores depend on the distance only; contiguous halves would split every pair between the two maps."""
    rope = RotaryPositional(d_k=8)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 6, 8, generator=g), torch.randn(1, 1, 6, 8, generator=g)

    def scores(offset: int, half: slice) -> torch.Tensor:
        rq, rk = rope.rotate(q, offset), rope.rotate(k, offset)
        return rq[..., half] @ rk[..., half].transpose(-2, -1)  # (1, 1, T, T)

    for half in (slice(0, None, 2), slice(1, None, 2)):  # Q1 K1^T and Q2 K2^T: shifting every position changes nothing
        torch.testing.assert_close(scores(0, half), scores(7, half), atol=1e-5, rtol=0)
    assert not torch.allclose(scores(0, slice(0, 4)), scores(7, slice(0, 4)), atol=1e-3)
