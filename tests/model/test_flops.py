"""FLOPs per token, counted by walking the built modules, against FlopCounterMode over a real forward and backward
pass, for every registered variant of every model kind (generated from the registry), in both architectures;
and models built on the meta device against models built for real."""

from __future__ import annotations

import pytest
import torch

import ablate
from ablate import registry
from ablate.model.flops import count_flops, measure_flops
from ablate.model.meta import build_on_meta
from tests.conftest import TINY, skip_if_refused

VARIANTS = [(k.name, name) for k in registry.kinds().values() if k.section == "model"
            for name in registry.names(k.name)]


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
@pytest.mark.parametrize("kind,name", VARIANTS, ids=[f"{k}={n}" for k, n in VARIANTS])
def test_the_module_walk_counts_what_flop_counter_mode_measures(kind, name, arch):
    skip_if_refused(kind, name, arch)
    cfg = ablate.load_config(None, TINY + [f"model.{kind}={name}", f"model.arch={arch}", "model.n_layers=3"])
    model = build_on_meta(cfg)
    assert count_flops(model, cfg, 10) == pytest.approx(measure_flops(model, cfg, 10), rel=1e-9)


def test_the_paper_base_model_is_six_flops_per_parameter_and_token_plus_attention():
    """Kaplan et al. 2020: 6 N per token for the weight matrices (N without embeddings' lookups, with the
    generator), plus 6 x 2 h T (d_k + d_v) per layer's attention (3 in the decoder) per token."""
    cfg = ablate.load_config(ablate.__path__[0] + "/../configs/transformer_base.yaml", ["data.vocab_size=37000"])
    model = build_on_meta(cfg)
    d, dff, V, T = 512, 2048, 37000, 128
    matrices = 6 * (4 * d * d + 2 * d * dff) + 6 * (8 * d * d + 2 * d * dff) + V * d  # encoder, decoder, generator
    attention = (6 + 2 * 6) * 2 * 8 * T * (64 + 64)  # 6 encoder self, 6 decoder self, 6 decoder cross
    assert count_flops(model, cfg, T) == 3 * (2 * matrices + attention)


@pytest.mark.parametrize("kind,name", VARIANTS, ids=[f"{k}={n}" for k, n in VARIANTS])
def test_a_meta_build_is_the_real_build_without_memory(kind, name):
    cfg = ablate.load_config(None, TINY + [f"model.{kind}={name}"])
    torch.manual_seed(0)
    real = ablate.build_model(cfg)
    meta = build_on_meta(cfg)
    assert all(p.is_meta for p in meta.parameters())
    assert [(n, p.shape) for n, p in meta.named_parameters()] == [(n, p.shape) for n, p in real.named_parameters()]
    assert ablate.count_parameters(meta) == ablate.count_parameters(real)
    torch.manual_seed(0)
    again = ablate.build_model(cfg)  # building on the meta device leaves initialisation alone elsewhere
    assert all(torch.equal(a, b) for a, b in zip(real.parameters(), again.parameters()))
    assert any(p.abs().sum() > 0 for n, p in again.named_parameters() if "weight" in n and p.dim() > 1)
