"""Lightweight and dynamic convolutions (Wu et al. 2019) against a brute-force loop over positions and taps, and
against torch's depthwise conv1d; their contracts: causal in the decoder, centred in the encoder, masks and key
padding, cached decoding, parameter and FLOP counts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ablate
from ablate.components.attention import KVCache, MultiHeadAttention
from ablate.components.convolution import DynamicConvolution, LightweightConvolution
from ablate.components.position_bias import ALiBi
from ablate.errors import ConfigError
from ablate.model.flops import count_flops, measure_flops
from ablate.model.meta import build_on_meta
from tests.conftest import TINY, padded_masks

d, H, K = 8, 2, 3  # d_model, groups (n_heads), kernel width
c = d // H  # channels per group
DIMS = dict(d_model=d, n_heads=H, d_k=5, d_v=6, kernel_size=K)  # d_k, d_v: cross-attention's only
VARIANTS = {"light": LightweightConvolution, "dynamic": DynamicConvolution}


def _x(T: int = 6, B: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(B, T, d, generator=torch.Generator().manual_seed(seed))


def _masks(T: int = 6) -> dict[str, torch.Tensor]:
    return padded_masks(T)


def _kernel(conv, u_i: torch.Tensor, g: int) -> torch.Tensor:
    """Group g's K tap logits for a position whose GLU output is u_i (d_model,)."""
    if isinstance(conv, LightweightConvolution):
        return conv.kernel[g]
    return (conv.w_kernel.weight @ u_i + conv.w_kernel.bias).view(H, K)[g]  # f(u_i), the position's own


def _brute_force(conv, x: torch.Tensor, mask: torch.Tensor, stack: str, bias: torch.Tensor | None = None):
    """u = GLU(x W_in); out_i = sum over taps t of softmax(kernel)_t * u_{i + offset_t}, for the taps inside the
    sequence whose key the mask allows; then W^O."""
    B, T, _ = x.shape
    offsets = range(-(K - 1), 1) if stack == "decoder" else range(-(K // 2), K // 2 + 1)
    a, gate = (x @ conv.w_in.weight.T + conv.w_in.bias).split(d, dim=-1)
    u = a * torch.sigmoid(gate)  # (B, T, d)
    out = torch.zeros(B, T, d)
    for b in range(B):
        for i in range(T):
            for g in range(H):
                logits = _kernel(conv, u[b, i], g).clone()
                for t, o in enumerate(offsets):
                    if bias is not None and 0 <= i + o < T:
                        logits[t] = logits[t] + bias[g, i, i + o]
                w = torch.softmax(logits, dim=0)  # over all K taps: no renormalisation at edges or padding
                for t, o in enumerate(offsets):
                    j = i + o
                    if 0 <= j < T and mask[b, 0, min(i, mask.size(2) - 1), j]:
                        out[b, i, g * c : (g + 1) * c] += w[t] * u[b, j, g * c : (g + 1) * c]
    return conv.w_o(out)


@pytest.mark.parametrize("stack", ["decoder", "encoder"])
@pytest.mark.parametrize("name", VARIANTS)
def test_convolutions_are_the_papers_equations_position_by_position(name, stack):
    torch.manual_seed(0)
    conv = VARIANTS[name](**DIMS, stack=stack)
    x, mask = _x(), _masks()[stack]
    with torch.no_grad():
        torch.testing.assert_close(conv(x, mask), _brute_force(conv, x, mask, stack), atol=1e-5, rtol=0)


@pytest.mark.parametrize("stack", ["decoder", "encoder"])
def test_lightconv_without_a_mask_is_torchs_depthwise_conv1d_with_zero_padding(stack):
    torch.manual_seed(0)
    conv = LightweightConvolution(**DIMS, stack=stack)
    x = _x()
    with torch.no_grad():
        u = F.glu(conv.w_in(x), dim=-1).transpose(1, 2)  # (B, d, T)
        weight = conv.kernel.softmax(-1).repeat_interleave(c, dim=0)[:, None, :]  # (d, 1, K): a group's channels share
        left, right = (K - 1, 0) if stack == "decoder" else (K // 2, K // 2)
        expected = conv.w_o(F.conv1d(F.pad(u, (left, right)), weight, groups=d).transpose(1, 2))
        torch.testing.assert_close(conv(x, None), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", VARIANTS)
def test_a_score_bias_joins_the_kernels_logits_at_each_taps_key(name):
    torch.manual_seed(0)
    alibi = ALiBi(n_heads=H)
    conv = VARIANTS[name](**DIMS, stack="decoder", positional=alibi)
    x, mask = _x(), _masks()["decoder"]
    with torch.no_grad():
        expected = _brute_force(conv, x, mask, "decoder", alibi.score_bias(6, 6))
        torch.testing.assert_close(conv(x, mask), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", VARIANTS)
def test_cached_chunks_equal_the_full_pass_and_the_cache_holds_the_glu_outputs(name):
    torch.manual_seed(0)
    conv = VARIANTS[name](**DIMS, stack="decoder").eval()
    x, mask = _x(), _masks()["decoder"]
    with torch.no_grad():
        full = conv(x, mask)
        cache, steps, start = KVCache(), [], 0
        for size in (1, 3, 1, 1):
            steps.append(conv(x[:, start : start + size], mask[:, :, start : start + size, : start + size], cache))
            start += size
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache.length == 6 and cache.k.shape == (2, H, 6, 0)  # no keys: zero-width
    torch.testing.assert_close(cache.v, F.glu(conv.w_in(x), dim=-1).view(2, 6, H, c).transpose(1, 2))


@pytest.mark.parametrize("name", VARIANTS)
def test_the_decoder_kernel_sees_no_later_position_and_the_encoder_kernel_only_its_window(name):
    torch.manual_seed(0)
    dec, enc = VARIANTS[name](**DIMS, stack="decoder"), VARIANTS[name](**DIMS, stack="encoder")
    x = _x(T=8)
    later = x.clone()
    later[:, 5] = torch.randn(2, d)
    with torch.no_grad():
        torch.testing.assert_close(dec(x, None)[:, :5], dec(later, None)[:, :5], atol=0, rtol=0)
        assert not torch.allclose(dec(x, None)[:, 5:5 + K], dec(later, None)[:, 5:5 + K])  # i .. i+K-1 see it
        torch.testing.assert_close(dec(x, None)[:, 5 + K:], dec(later, None)[:, 5 + K:], atol=0, rtol=0)
        changed = (enc(x, None) - enc(later, None)).abs().amax(dim=(0, 2)) > 0  # (T,)
    assert changed.tolist() == [abs(i - 5) <= K // 2 for i in range(8)]


@pytest.mark.parametrize("stack", ["decoder", "encoder"])
@pytest.mark.parametrize("name", VARIANTS)
def test_a_padded_keys_content_changes_no_real_output(name, stack):
    """Row 1's last two positions are padding: they contribute 0 to every tap; with a kernel that does not depend on
    the input (light), not even the padded positions' own outputs change."""
    torch.manual_seed(0)
    conv = VARIANTS[name](**DIMS, stack=stack)
    x, mask = _x(), _masks()[stack]
    other = x.clone()
    other[1, 4:] = torch.randn(2, d)
    with torch.no_grad():
        a, b = conv(x, mask), conv(other, mask)
    torch.testing.assert_close(a[0], b[0], atol=0, rtol=0)
    torch.testing.assert_close(a[1, :4], b[1, :4], atol=1e-6, rtol=0)
    if name == "light":
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_a_sliding_window_mask_cuts_the_kernel_short():
    """The mask kind applies at the taps too: a window of 2 keeps taps i-1 and i of a width-3 kernel."""
    torch.manual_seed(0)
    conv = LightweightConvolution(**DIMS, stack="decoder")
    x, j = _x(), torch.arange(6)
    window = ((j[None, :] <= j[:, None]) & (j[None, :] > j[:, None] - 2))[None, None]  # (1, 1, T, T)
    with torch.no_grad():
        torch.testing.assert_close(conv(x, window), _brute_force(conv, x, window.expand(2, 1, 6, 6), "decoder"),
                                   atol=1e-5, rtol=0)
        conv.keep_weights = True
        conv(x, window)
    w = conv.weights  # (B, H, T, T_k), the kernel laid out over the keys
    assert w.shape == (2, H, 6, 6) and (w[~window.expand(2, H, 6, 6)] == 0).all()
    torch.testing.assert_close(w[0, :, 3, 2:4], conv.kernel.softmax(-1)[:, 1:].detach())


def test_kernel_size_and_groups_are_checked_at_build_time():
    with pytest.raises(ConfigError, match="model.attention_args.kernel_size=4.*odd"):
        LightweightConvolution(**{**DIMS, "kernel_size": 4}, stack="encoder")
    LightweightConvolution(**{**DIMS, "kernel_size": 4}, stack="decoder")  # causal: any width
    with pytest.raises(ConfigError, match="model.attention_args.kernel_size=0"):
        DynamicConvolution(**{**DIMS, "kernel_size": 0}, stack="decoder")
    with pytest.raises(ConfigError, match="model.n_heads=3.*divisor of model.d_model=8"):
        LightweightConvolution(**{**DIMS, "n_heads": 3}, stack="decoder")
    with pytest.raises(ConfigError, match="model.attention_args.weight_dropout=1.0"):
        DynamicConvolution(**DIMS, stack="decoder", weight_dropout=1.0)


def test_parameter_counts_by_hand():
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    block = (d * 2 * d + 2 * d) + (d * d + d)  # input projection to the GLU, W^O (d_model -> d_model)
    assert n(LightweightConvolution(**DIMS, stack="decoder")) == block + H * K  # one kernel per group
    assert n(DynamicConvolution(**DIMS, stack="encoder")) == block + (d * H * K + H * K)  # f: d_model -> H x K
    mha = n(MultiHeadAttention(d_model=d, n_heads=H, d_k=5, d_v=6, cross=True))
    assert n(LightweightConvolution(**DIMS, stack="decoder", cross=True)) == mha


@pytest.mark.parametrize("name", VARIANTS)
def test_cross_attention_is_the_base_classs_dot_product_attention(name):
    torch.manual_seed(0)
    conv = VARIANTS[name](**DIMS, stack="decoder", cross=True)
    mha = MultiHeadAttention(d_model=d, n_heads=H, d_k=5, d_v=6, cross=True)
    mha.load_state_dict(conv.state_dict())
    x, memory = _x(), _x(T=7, seed=1)
    torch.testing.assert_close(conv(x, None, memory=memory), mha(x, None, memory=memory))
    assert conv.flops_per_token(7) == mha.flops_per_token(7)


def test_weight_dropout_drops_taps_in_training_only():
    torch.manual_seed(0)
    conv = LightweightConvolution(**DIMS, stack="decoder", weight_dropout=0.5)
    x = _x()
    with torch.no_grad():
        assert not torch.allclose(conv.train()(x, None), conv.eval()(x, None))
        everything = torch.ones(2, 1, 6, 6, dtype=torch.bool)
        expected = _brute_force(conv, x, everything, "decoder")
        torch.testing.assert_close(conv.eval()(x, None), expected, atol=1e-5, rtol=0)


def test_flops_per_token_by_hand():
    assert LightweightConvolution(**DIMS, stack="decoder").flops_per_token(100) == 2 * K * d  # independent of T
    assert DynamicConvolution(**DIMS, stack="decoder").flops_per_token(100) == 2 * K * d  # its f is an nn.Linear


@pytest.mark.parametrize("overrides", [
    ["model.attention=lightconv", "model.attention_args.kernel_size=3", "model.positional=alibi"],
    ["model.attention=dynamicconv", "model.attention_args.kernel_size=5", "model.positional=t5_bias",
     "model.mask=sliding_window", "model.mask_args.window=2"],
])
@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_the_module_walk_counts_what_flop_counter_mode_measures(overrides, arch):
    cfg = ablate.load_config(None, TINY + overrides + [f"model.arch={arch}"])
    model = build_on_meta(cfg)
    assert count_flops(model, cfg, 10) == pytest.approx(measure_flops(model, cfg, 10), rel=1e-9)


@pytest.mark.parametrize("name", VARIANTS)
def test_linear_layers_are_listed_in_the_order_they_run_so_fixup_zeroes_w_o(name):
    conv = VARIANTS[name](**DIMS, stack="decoder")
    linears = [m for m in conv.modules() if isinstance(m, torch.nn.Linear)]
    assert linears[0] is conv.w_in and linears[-1] is conv.w_o
