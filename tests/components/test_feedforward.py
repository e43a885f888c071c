"""Feed-forward variants against their equations, written out with torch ops on a tiny input: the activations Narang
et al. (2021) compared in place of ReLU, and the sigmoid-gated and bilinear GLUs (Dauphin et al. 2017; Shazeer 2020)."""

from __future__ import annotations

import pytest
import torch

import ablate
from ablate import registry
from ablate.components.feedforward import FeedForward, GatedFeedForward
from tests.conftest import TINY

D_MODEL, D_FF = 4, 6
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946  # Klambauer eq. 2

ACTIVATIONS = {
    "swish": lambda h: h * (1 / (1 + torch.exp(-h))),  # x sigmoid(x)
    "elu": lambda h: torch.where(h > 0, h, torch.exp(h) - 1),  # alpha = 1
    "selu": lambda h: SELU_SCALE * torch.where(h > 0, h, SELU_ALPHA * (torch.exp(h) - 1)),
    "sigmoid": lambda h: 1 / (1 + torch.exp(-h)),
    "softplus": lambda h: torch.log(1 + torch.exp(h)),
}


def _build(name: str, **args) -> torch.nn.Module:
    torch.manual_seed(0)
    ffn = registry.create("ffn", name, {"d_model": D_MODEL, "d_ff": D_FF}, args)
    with torch.no_grad():
        for p in ffn.parameters():  # every weight and bias nonzero, so a missing term would show
            p.copy_(torch.randn_like(p))
    return ffn


def _x() -> torch.Tensor:
    return torch.randn(2, 3, D_MODEL, generator=torch.Generator().manual_seed(1))  # (B, T, d_model)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_ffn_is_act_of_x_w1_plus_b1_times_w2_plus_b2(name):
    ffn = _build(name)
    assert isinstance(ffn, FeedForward)
    x = _x()
    w1, b1, w2, b2 = ffn.w_1.weight, ffn.w_1.bias, ffn.w_2.weight, ffn.w_2.bias
    expected = ACTIVATIONS[name](x @ w1.T + b1) @ w2.T + b2  # (2, 3, d_model)
    torch.testing.assert_close(ffn(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_ffn_has_the_papers_parameter_count(name):
    """W1 (d_model x d_ff) + b1 (d_ff) + W2 (d_ff x d_model) + b2 (d_model), as the paper's FFN;
    none with bias=False."""
    assert sum(p.numel() for p in _build(name).parameters()) == 2 * D_MODEL * D_FF + D_FF + D_MODEL
    assert sum(p.numel() for p in _build(name, bias=False).parameters()) == 2 * D_MODEL * D_FF


def test_the_activations_differ_from_each_other_and_from_relu():
    x = _x()
    outputs = []
    for name in ["relu", *ACTIVATIONS]:
        ffn = _build(name)  # the same seed: the same weights for each
        outputs.append(ffn(x))
    for i in range(len(outputs)):
        for j in range(i):
            assert not torch.allclose(outputs[i], outputs[j])


@pytest.mark.parametrize("name,gate", [("glu", lambda h: 1 / (1 + torch.exp(-h))), ("bilinear", lambda h: h)])
def test_gated_ffn_is_gate_of_x_w_times_x_v_then_w2(name, gate):
    """GLU (Dauphin et al. 2017): (sigmoid(x W) * x V) W2; bilinear (Shazeer 2020): (x W * x V) W2; no biases."""
    ffn = _build(name)
    assert isinstance(ffn, GatedFeedForward)
    assert all(m.bias is None for m in (ffn.w_gate, ffn.w_up, ffn.w_2))
    x = _x()
    W, V, W2 = ffn.w_gate.weight, ffn.w_up.weight, ffn.w_2.weight  # (d_ff, d_model), (d_ff, d_model), (d_model, d_ff)
    expected = (gate(x @ W.T) * (x @ V.T)) @ W2.T  # (2, 3, d_model)
    torch.testing.assert_close(ffn(x), expected, rtol=1e-5, atol=1e-5)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * D_MODEL * D_FF


def test_bilinear_is_quadratic_in_its_input():
    """No activation: (2x W * 2x V) W2 = 4 (x W * x V) W2."""
    ffn, x = _build("bilinear"), _x()
    torch.testing.assert_close(ffn(2 * x), 4 * ffn(x), rtol=1e-5, atol=1e-5)


def test_gated_variants_take_biases_when_asked():
    ffn = _build("glu", bias=True)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * D_MODEL * D_FF + 2 * D_FF + D_MODEL


@pytest.mark.parametrize("name", [*ACTIVATIONS, "glu", "bilinear"])
def test_every_layer_of_a_built_model_uses_the_variant(name):
    model = ablate.build_model(ablate.load_config(None, TINY + [f"model.ffn={name}"]))
    ffns = [layer.ffn for stack in (model.encoder, model.decoder) for layer in stack.layers]
    assert len(ffns) == 4
    kind = GatedFeedForward if name in ("glu", "bilinear") else FeedForward
    assert all(isinstance(f, kind) for f in ffns)


@pytest.mark.parametrize("name", [*ACTIVATIONS, "glu", "bilinear"])
def test_each_description_names_its_paper_or_says_it_is_a_control(name):
    description = registry.get("ffn", name).description
    assert any(str(year) in description for year in range(2000, 2030)) or "control" in description
    assert "\n" not in description
