"""Multi-head latent attention (DeepSeek-V2) against its equations: keys and values up-projected from a latent,
a cache that holds the latent, and its parameter count."""

from __future__ import annotations

import math

import pytest
import torch

import ablate
from ablate.components.latent_attention import MultiHeadLatentAttention
from ablate.components.positional import RotaryPositional
from ablate.errors import ConfigError
from tests.conftest import TINY

DIMS = dict(d_model=16, n_heads=4, d_k=4, d_v=2)
CAUSAL = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)


def _x(T: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(2, T, 16, generator=torch.Generator().manual_seed(seed))


def _linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return x @ layer.weight.T + layer.bias


def _rms(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps) * gain


def _heads(t: torch.Tensor) -> torch.Tensor:
    B, T, _ = t.shape
    return t.view(B, T, 4, -1).transpose(1, 2)  # (B, h, T, d)


def _attention_by_hand(attn, q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    heads = scores.softmax(-1) @ v  # (B, h, T, d_v)
    return _linear(attn.w_o, heads.transpose(1, 2).reshape(q.size(0), q.size(2), -1))


def test_keys_and_values_are_up_projections_of_the_normalised_latent():
    """c_KV = RMSNorm(W^DKV x), k = W^UK c_KV, v = W^UV c_KV, q = W^Q x."""
    torch.manual_seed(0)
    attn = MultiHeadLatentAttention(**DIMS, d_latent=6)
    with torch.no_grad():
        attn.kv_norm.weight.uniform_(0.5, 1.5)
    x = _x()
    c = _rms(_linear(attn.w_dkv, x), attn.kv_norm.weight)  # (B, T, d_latent)
    k, v = _heads(_linear(attn.w_uk, c)), _heads(_linear(attn.w_uv, c))  # (B, h, T, 4), (B, h, T, 2)
    torch.testing.assert_close(attn.latent(x), c[:, None], atol=1e-6, rtol=0)
    torch.testing.assert_close(attn.up_project(c[:, None]), (k, v), atol=1e-6, rtol=0)
    expected = _attention_by_hand(attn, _heads(_linear(attn.w_q, x)), k, v, CAUSAL)
    torch.testing.assert_close(attn(x, CAUSAL), expected, atol=1e-5, rtol=0)


def test_queries_come_from_their_own_latent_when_d_q_latent_is_set():
    """q = W^UQ RMSNorm(W^DQ x); without the norm, q = W^UQ W^DQ x."""
    torch.manual_seed(0)
    for latent_norm in (True, False):
        attn = MultiHeadLatentAttention(**DIMS, d_latent=6, d_q_latent=5, latent_norm=latent_norm)
        x = _x()
        c_q = _linear(attn.w_q.w_dq, x)  # (B, T, d_q_latent)
        c_q = _rms(c_q, attn.w_q.q_norm.weight) if latent_norm else c_q
        torch.testing.assert_close(attn.queries(x), _heads(_linear(attn.w_q.w_uq, c_q)), atol=1e-6, rtol=0)


def test_rope_rotates_the_up_projected_keys_from_position_0():
    torch.manual_seed(0)
    rope = RotaryPositional(d_k=4)
    attn = MultiHeadLatentAttention(**DIMS, d_latent=6, positional=rope)
    x = _x()
    k, v = attn.up_project(attn.latent(x))
    q = rope.rotate(attn.queries(x), 0)
    torch.testing.assert_close(attn(x, CAUSAL), _attention_by_hand(attn, q, rope.rotate(k, 0), v, CAUSAL),
                               atol=1e-5, rtol=0)


def test_cross_attention_up_projects_the_cached_latent_of_the_encoder_output():
    torch.manual_seed(0)
    attn = MultiHeadLatentAttention(**DIMS, d_latent=6, cross=True)
    x, memory = _x(), _x(7, seed=1)
    cache = attn.project_memory(memory)
    assert cache.k.shape == (2, 1, 7, 6) and cache.v.shape == (2, 1, 7, 0)  # the latent only
    k, v = attn.up_project(cache.k)
    expected = _attention_by_hand(attn, attn.queries(x), k, v, None)
    torch.testing.assert_close(attn(x, None, cache), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(attn(x, None, memory=memory), expected, atol=1e-5, rtol=0)


def _model(overrides: list[str]) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + ["data.vocab_size=40", "model.attention=mla", *overrides])
    return ablate.build_model(cfg).eval()


@pytest.mark.parametrize("positional", ["sinusoidal", "rope"])
def test_the_cache_holds_the_latent_and_cached_decoding_equals_the_full_pass(positional):
    model = _model([f"model.positional={positional}", "model.attention_args.d_latent=6",
                    "model.attention_args.d_q_latent=5"])
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(3, 40, (3, 7), generator=g), torch.randint(3, 40, (3, 6), generator=g)
    tgt[:, 0] = 1  # BOS
    with torch.no_grad():
        full = model(src, tgt)  # (B, T, V)
        state = model.start_decoding(src)
        steps = [model.decode_step(tgt[:, :3], state)]  # a prefill of 3, then one position a step
        steps += [model.decode_step(tgt[:, t : t + 1], state) for t in (3, 4, 5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    for layer in state.layers:
        assert layer.self_attn.k.shape == (3, 1, 6, 6)  # (B, 1, T, d_latent): one latent per decoded position
        assert layer.self_attn.v.shape == (3, 1, 6, 0)  # no values
        assert layer.cross_attn.k.shape == (3, 1, 7, 6) and layer.cross_attn.v.numel() == 0


def test_the_parameter_count_is_the_paper_s_projections():
    """W^DKV, RMSNorm's gain, W^UK, W^UV, W^Q (or W^DQ, its gain, W^UQ), W^O, each linear with its bias."""
    d, h, d_k, d_v, d_c, d_q = 16, 4, 4, 2, 6, 5
    linear = lambda i, o: i * o + o  # noqa: E731
    kv = linear(d, d_c) + d_c + linear(d_c, h * d_k) + linear(d_c, h * d_v)
    out = linear(h * d_v, d)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(MultiHeadLatentAttention(**DIMS, d_latent=d_c)) == kv + linear(d, h * d_k) + out
    assert count(MultiHeadLatentAttention(**DIMS, d_latent=d_c, d_q_latent=d_q)) == (
        kv + linear(d, d_q) + d_q + linear(d_q, h * d_k) + out)
    without_norm = MultiHeadLatentAttention(**DIMS, d_latent=d_c, latent_norm=False)
    assert count(without_norm) == kv - d_c + linear(d, h * d_k) + out
    assert count(MultiHeadLatentAttention(**DIMS, d_latent=d_c, cross=True)) == kv + linear(d, h * d_k) + out


def test_the_cache_per_position_is_d_latent_instead_of_h_d_k_plus_d_v():
    attn = MultiHeadLatentAttention(d_model=512, n_heads=8, d_k=64, d_v=64, d_latent=64)
    c = attn.latent(torch.zeros(1, 3, 512))
    assert c.shape[-1] == 64 and 8 * (64 + 64) / c.shape[-1] == 16  # 16 times fewer numbers than multi-head attention


@pytest.mark.parametrize("key,value", [("d_latent", 0), ("d_q_latent", -1)])
def test_mla_refuses_bad_latent_sizes(key, value):
    with pytest.raises(ConfigError, match=f"model.attention_args.{key}"):
        MultiHeadLatentAttention(**DIMS, **{key: value})


def test_deep_norm_scales_the_value_up_projection_and_w_o():
    torch.manual_seed(0)
    attn = MultiHeadLatentAttention(**DIMS, d_latent=6)
    before = {n: p.detach().clone() for n, p in attn.named_parameters()}
    attn.scale_values(0.5)
    for name, p in attn.named_parameters():
        scaled = name in ("w_uv.weight", "w_o.weight")
        torch.testing.assert_close(p, before[name] * (0.5 if scaled else 1.0))
