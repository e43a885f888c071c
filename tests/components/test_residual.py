"""Residual variants against their papers: ReZero starts as the identity, DeepNorm's constants and init, sandwich norm,
and layer sharing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ablate
from ablate.components.residual import DeepNorm, ReZero, SandwichNorm, deepnorm_constants
from tests.conftest import TINY


def test_rezero_starts_as_the_identity():
    """Bachlechner et al. 2020: x_{i+1} = x_i + alpha_i F(x_i), alpha_i = 0 at initialisation."""
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + ["model.norm_position=rezero", "model.dropout=0.0"])
    model = ablate.build_model(cfg).eval()
    x = torch.randn(2, 5, 32)
    layer = model.encoder.layers[0]
    assert torch.equal(layer(x, None), x)
    assert not any(isinstance(m, (nn.LayerNorm, nn.RMSNorm)) for m in model.encoder.modules())  # no norm at all
    res = ReZero(dropout=0.0)
    res.alpha.data.fill_(0.5)
    assert torch.allclose(res(x, torch.tanh), x + 0.5 * torch.tanh(x))


@pytest.mark.parametrize("N,M", [(6, 6), (12, 12), (100, 100), (18, 6)])
def test_deepnorm_constants_are_the_papers(N, M):
    """Wang et al. 2022 (DeepNet), encoder-decoder: encoder alpha = 0.81 (N^4 M)^(1/16), beta = 0.87 (N^4 M)^(-1/16);
    decoder alpha = (3M)^(1/4), beta = (12M)^(-1/4); decoder-only: alpha = (2M)^(1/4), beta = (8M)^(-1/4)."""
    enc = deepnorm_constants(stack="encoder", n_encoder_layers=N, n_decoder_layers=M, decoder_only=False)
    dec = deepnorm_constants(stack="decoder", n_encoder_layers=N, n_decoder_layers=M, decoder_only=False)
    lm = deepnorm_constants(stack="decoder", n_encoder_layers=N, n_decoder_layers=M, decoder_only=True)
    assert enc == pytest.approx((0.81 * (N**4 * M) ** 0.0625, 0.87 * (N**4 * M) ** -0.0625))
    assert dec == pytest.approx(((3 * M) ** 0.25, (12 * M) ** -0.25))
    assert lm == pytest.approx(((2 * M) ** 0.25, (8 * M) ** -0.25))


def test_deepnorm_6_6_values():
    """The same constants as numbers, for the 6+6 base model: a typo in the formula would show here."""
    alpha, beta = deepnorm_constants(stack="encoder", n_encoder_layers=6, n_decoder_layers=6, decoder_only=False)
    assert (round(alpha, 3), round(beta, 3)) == (1.418, 0.497)
    alpha, beta = deepnorm_constants(stack="decoder", n_encoder_layers=6, n_decoder_layers=6, decoder_only=False)
    assert (round(alpha, 3), round(beta, 3)) == (2.060, 0.343)


def test_deepnorm_scales_the_residual_and_the_value_output_and_ffn_weights_at_init():
    torch.manual_seed(0)
    post = ablate.build_model(ablate.load_config(None, TINY))
    torch.manual_seed(0)
    deep = ablate.build_model(ablate.load_config(None, TINY + ["model.norm_position=deepnorm"]))
    layer, ref = deep.encoder.layers[0], post.encoder.layers[0]
    beta = layer.res_attn.beta
    assert isinstance(layer.res_attn, DeepNorm) and layer.res_attn.alpha == pytest.approx((0.81 * 32 ** 0.0625))
    assert torch.allclose(layer.ffn.w_1.weight, beta * ref.ffn.w_1.weight)
    assert torch.allclose(layer.self_attn.w_o.weight, beta * ref.self_attn.w_o.weight)
    q_k, v = slice(0, 64), slice(64, 96)  # w_qkv rows: queries and keys, then values
    assert torch.equal(layer.self_attn.w_qkv.weight[q_k], ref.self_attn.w_qkv.weight[q_k])
    assert torch.allclose(layer.self_attn.w_qkv.weight[v], beta * ref.self_attn.w_qkv.weight[v])
    x = torch.randn(2, 4, 32)
    res = layer.res_ffn.eval()
    assert torch.allclose(res(x, torch.tanh), res.norm(res.alpha * x + torch.tanh(x)), atol=1e-6)


def test_sandwich_norm_normalises_the_sublayer_output_too():
    torch.manual_seed(0)
    res = SandwichNorm(norm=nn.LayerNorm(8), dropout=0.0)
    nn.init.normal_(res.out_norm.weight)  # distinct from the input norm, so a swap would show
    x = torch.randn(2, 3, 8)
    assert torch.allclose(res(x, torch.tanh), x + res.out_norm(torch.tanh(res.norm(x))))
    assert res.norm is not res.out_norm and SandwichNorm.final_norm


def test_sharing_all_uses_one_layer_per_stack():
    shared = ablate.build_model(ablate.load_config(None, TINY + ["model.sharing=all", "model.n_layers=3"]))
    plain = ablate.build_model(ablate.load_config(None, TINY + ["model.n_layers=3"]))
    assert shared.encoder.layers[0] is shared.encoder.layers[2] and shared.decoder.layers[0] is shared.decoder.layers[1]
    per_layer = sum(p.numel() for p in plain.encoder.layers[0].parameters())
    per_dec_layer = sum(p.numel() for p in plain.decoder.layers[0].parameters())
    saved = ablate.count_parameters(plain)["total"] - ablate.count_parameters(shared)["total"]
    assert saved == 2 * per_layer + 2 * per_dec_layer
