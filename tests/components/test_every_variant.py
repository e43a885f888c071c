"""Generated from the registry: every registered model component builds, trains a step, and keeps shapes.

A variant registered tomorrow is tested here without a new line of test code.
"""

from __future__ import annotations

import math

import pytest
import torch

import ablate
from ablate import registry
from tests.conftest import TINY

MODEL_KINDS = ("positional", "mask", "ffn", "norm", "norm_position")
VARIANTS = [(kind, name) for kind in MODEL_KINDS for name in registry.names(kind)]
ARCHS = ("encoder_decoder", "decoder_only")


def _batch(vocab: int, pad: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, vocab, (3, 7), generator=g)
    tgt = torch.randint(3, vocab, (3, 5), generator=g)
    src[0, 5:] = pad  # padding matters
    tgt[1, 3:] = pad
    return {"src": src, "tgt": tgt}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind,name", VARIANTS, ids=[f"{k}={n}" for k, n in VARIANTS])
def test_variant_forward_backward(kind, name, arch):
    cfg = ablate.load_config(None, TINY + [f"model.{kind}={name}", f"model.arch={arch}"])
    model = ablate.build_model(cfg)
    b = _batch(cfg.data.vocab_size, cfg.data.pad_id)
    logits = model(b["src"], b["tgt"]) if arch == "encoder_decoder" else model(b["tgt"])
    assert logits.shape == (3, 5, cfg.data.vocab_size)
    assert torch.isfinite(logits).all()
    logits.logsumexp(-1).mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("name", registry.names("schedule"))
def test_schedule_gives_positive_finite_lr(name):
    entry = registry.get("schedule", name)
    context = {"d_model": 64, "lr": 1e-3, "max_steps": 1000}
    schedule = registry.create("schedule", name, context, {"warmup": 10})
    lrs = [schedule(step) for step in range(0, 1000, 7)]
    assert all(lr > 0 and math.isfinite(lr) for lr in lrs), entry.name
