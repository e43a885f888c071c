"""The dense and random Synthesizers (Tay et al. 2021) against a brute-force loop over positions, and their
contracts: masks (causal, key padding), cached decoding, the length limit, parameter and FLOP counts."""

from __future__ import annotations

import pytest
import torch

import ablate
from ablate.components.attention import KVCache, MultiHeadAttention
from ablate.components.position_bias import ALiBi
from ablate.components.synthesizer import DenseSynthesizer, RandomSynthesizer
from ablate.errors import ConfigError
from ablate.model.flops import count_flops, measure_flops
from ablate.model.meta import build_on_meta
from tests.conftest import TINY, padded_masks

d, h, d_k, d_v, L = 8, 2, 3, 4, 6  # d_model, heads, hidden per head, values per head, max_len
DIMS = dict(d_model=d, n_heads=h, d_k=d_k, d_v=d_v, max_len=L)
VARIANTS = {"dense": DenseSynthesizer, "random": RandomSynthesizer}


def _x(T: int = 5, B: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(B, T, d, generator=torch.Generator().manual_seed(seed))


def _masks(T: int = 5) -> dict[str, torch.Tensor]:
    return padded_masks(T)


def _logits_of_position(attn, x_i: torch.Tensor, head: int, i: int) -> torch.Tensor:
    """The paper's logits (max_len,) of query position i in one head, from its input x_i (d_model,) alone."""
    if isinstance(attn, DenseSynthesizer):
        W1, b1 = attn.w_1.weight[head * d_k : (head + 1) * d_k], attn.w_1.bias[head * d_k : (head + 1) * d_k]
        return attn.w_2[head].T @ torch.relu(W1 @ x_i + b1) + attn.b_2[head]  # W2 relu(W1 x_i + b1) + b2
    return attn.R[head, i]  # the row of R for query position i


def _brute_force(attn, x: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """For each query position: its logits over the keys present, the allowed ones softmaxed, the values weighed."""
    B, T, _ = x.shape
    out = torch.zeros(B, T, h * d_v)
    for b in range(B):
        for head in range(h):
            W_v, b_v = attn.w_v.weight[head * d_v : (head + 1) * d_v], attn.w_v.bias[head * d_v : (head + 1) * d_v]
            for i in range(T):
                keys = [j for j in range(T) if mask[b, 0, min(i, mask.size(2) - 1), j]]
                logits = _logits_of_position(attn, x[b, i], head, i)[:T]
                if bias is not None:
                    logits = logits + bias[head, i]
                w = torch.softmax(logits[keys], dim=0)
                out[b, i, head * d_v : (head + 1) * d_v] = sum(w[n] * (W_v @ x[b, j] + b_v) for n, j in enumerate(keys))
    return attn.w_o(out)


@pytest.mark.parametrize("stack", ["decoder", "encoder"])
@pytest.mark.parametrize("name", VARIANTS)
def test_synthesizers_are_the_papers_equations_position_by_position(name, stack):
    torch.manual_seed(0)
    attn = VARIANTS[name](**DIMS)
    x, mask = _x(), _masks()[stack]
    with torch.no_grad():
        torch.testing.assert_close(attn(x, mask), _brute_force(attn, x, mask), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", VARIANTS)
def test_a_score_bias_joins_the_synthesized_logits(name):
    torch.manual_seed(0)
    alibi = ALiBi(n_heads=h)
    attn = VARIANTS[name](**DIMS, positional=alibi)
    x, mask = _x(), _masks()["decoder"]
    with torch.no_grad():
        expected = _brute_force(attn, x, mask, alibi.score_bias(5, 5))
        torch.testing.assert_close(attn(x, mask), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", VARIANTS)
def test_cached_chunks_equal_the_full_pass_and_the_cache_holds_only_values(name):
    torch.manual_seed(0)
    attn = VARIANTS[name](**DIMS).eval()
    x, mask = _x(T=6), _masks(T=6)["decoder"]
    with torch.no_grad():
        full = attn(x, mask)
        cache, steps, start = KVCache(), [], 0
        for size in (2, 1, 3):
            steps.append(attn(x[:, start : start + size], mask[:, :, start : start + size, : start + size], cache))
            start += size
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache.length == 6 and cache.k.shape == (2, h, 6, 0)  # no keys: zero-width
    torch.testing.assert_close(cache.v, attn.w_v(x).view(2, 6, h, d_v).transpose(1, 2))  # G(X) of every position


@pytest.mark.parametrize("stack", ["decoder", "encoder"])
@pytest.mark.parametrize("name", VARIANTS)
def test_a_padded_keys_content_changes_no_real_output(name, stack):
    """Row 1's last two positions are padding: what they hold reaches no real position's output; with weights that do
    not depend on the input (random), not even the padded positions' own."""
    torch.manual_seed(0)
    attn = VARIANTS[name](**DIMS)
    x, mask = _x(), _masks()[stack]
    other = x.clone()
    other[1, 3:] = torch.randn(2, d)
    with torch.no_grad():
        a, b = attn(x, mask), attn(other, mask)
    torch.testing.assert_close(a[0], b[0], atol=0, rtol=0)
    torch.testing.assert_close(a[1, :3], b[1, :3], atol=1e-6, rtol=0)
    if name == "random":
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", VARIANTS)
def test_a_query_with_no_key_it_may_attend_to_gets_zero_not_nan(name):
    attn = VARIANTS[name](**DIMS)
    x = _x().requires_grad_()
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    mask[0, 0, 2] = False  # position 2 of row 0 may attend to nothing
    heads = attn.self_heads(x, mask, None)  # (B, h, T, d_v)
    assert torch.isfinite(heads).all() and (heads[0, :, 2] == 0).all()
    heads.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters() if p.grad is not None)


@pytest.mark.parametrize("name", VARIANTS)
def test_a_sequence_longer_than_max_len_is_refused_clearly(name):
    attn = VARIANTS[name](**DIMS)
    with pytest.raises(ValueError, match=r"length 7 exceeds model.attention_args.max_len=6"):
        attn(_x(T=7), None)
    cache = KVCache()
    attn(_x(T=5), None, cache)
    with pytest.raises(ValueError, match=r"length 7 exceeds model.attention_args.max_len=6"):
        attn(_x(T=2), None, cache)  # positions 5 and 6 of a cached sequence
    assert attn.max_len == 6 and isinstance(attn.max_len, int)


def test_max_len_must_be_positive():
    with pytest.raises(ConfigError, match="model.attention_args.max_len=0"):
        DenseSynthesizer(**{**DIMS, "max_len": 0})


def test_parameter_counts_by_hand():
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    values_and_output = (d * h * d_v + h * d_v) + (h * d_v * d + d)  # G(X) and W^O
    dense = (d * h * d_k + h * d_k) + (h * d_k * L + h * L)  # W1, b1 (every head), W2, b2 (per head)
    assert n(DenseSynthesizer(**DIMS)) == dense + values_and_output
    assert n(RandomSynthesizer(**DIMS)) == h * L * L + values_and_output  # R: l^2 per head
    fixed = RandomSynthesizer(**DIMS, fixed=True)
    assert n(fixed) == values_and_output and fixed.R.shape == (h, L, L) and "R" in fixed.state_dict()
    mha = sum(p.numel() for p in MultiHeadAttention(d_model=d, n_heads=h, d_k=d_k, d_v=d_v, cross=True).parameters())
    assert n(DenseSynthesizer(**DIMS, cross=True)) == n(RandomSynthesizer(**DIMS, cross=True)) == mha


def test_a_random_r_is_standard_normal_and_a_fixed_one_is_never_trained():
    torch.manual_seed(0)
    R = RandomSynthesizer(**{**DIMS, "max_len": 64}).R
    assert R.requires_grad and abs(R.mean().item()) < 0.02 and abs(R.std().item() - 1) < 0.02
    fixed = RandomSynthesizer(**DIMS, fixed=True)
    fixed(_x(), None).sum().backward()
    assert not fixed.R.requires_grad and fixed.R.grad is None


@pytest.mark.parametrize("name", VARIANTS)
def test_cross_attention_is_the_base_classs_dot_product_attention(name):
    torch.manual_seed(0)
    synth = VARIANTS[name](**DIMS, cross=True)
    mha = MultiHeadAttention(d_model=d, n_heads=h, d_k=d_k, d_v=d_v, cross=True)
    mha.load_state_dict(synth.state_dict())
    x, memory = _x(), _x(T=7, seed=1)
    torch.testing.assert_close(synth(x, None, memory=memory), mha(x, None, memory=memory))
    assert synth.flops_per_token(7) == mha.flops_per_token(7)


def test_flops_per_token_by_hand():
    T = 5
    assert DenseSynthesizer(**DIMS).flops_per_token(T) == 2 * h * d_k * T + 2 * h * T * d_v  # W2, then weights x values
    assert RandomSynthesizer(**DIMS).flops_per_token(T) == 2 * h * T * d_v
    assert RandomSynthesizer(**DIMS, fixed=True).flops_per_token(T) == pytest.approx(2 * h * T * d_v * 2 / 3)


@pytest.mark.parametrize("overrides", [
    ["model.attention=synthesizer_random", "model.attention_args.fixed=true"],
    ["model.attention=synthesizer_random", "model.attention_args.fixed=true", "model.positional=t5_bias"],
    ["model.attention=synthesizer_dense", "model.attention_args.max_len=16", "model.positional=alibi"],
])
@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_the_module_walk_counts_what_flop_counter_mode_measures(overrides, arch):
    """Beyond the generated test's defaults: a frozen R (backward multiplies once), one with a learned bias (twice)."""
    cfg = ablate.load_config(None, TINY + overrides + [f"model.arch={arch}"])
    model = build_on_meta(cfg)
    assert count_flops(model, cfg, 10) == pytest.approx(measure_flops(model, cfg, 10), rel=1e-9)


def test_keep_weights_records_the_masked_softmax():
    attn = DenseSynthesizer(**DIMS)
    attn.keep_weights = True
    mask = _masks()["decoder"]
    attn(_x(), mask)
    assert attn.weights.shape == (2, h, 5, 5)
    assert (attn.weights[~mask.expand(2, h, 5, 5)] == 0).all()
    torch.testing.assert_close(attn.weights.sum(-1), torch.ones(2, h, 5))


@pytest.mark.parametrize("name", VARIANTS)
def test_linear_layers_are_listed_in_the_order_they_run_so_fixup_zeroes_w_o(name):
    attn = VARIANTS[name](**DIMS)
    linears = [m for m in attn.modules() if isinstance(m, torch.nn.Linear)]
    assert linears[-1] is attn.w_o and linears[0] is attn.w_v
