"""The projected, chunked output loss (ablate.train.loss) equals F.cross_entropy on the full logits: value and
gradients, with label smoothing and padding, in fp32 and under bf16 autocast; the system takes it for every head
that states it is one product, and the full logits for the others."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

import ablate
from ablate import registry
from ablate.train.loss import projected_loss, supports_projected_loss
from ablate.train.system import TransformerSystem
from tests.conftest import TINY

PAD = 0


def _data(B=3, T=7, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, T, d, generator=g)
    labels = torch.randint(1, 24, (B, T), generator=g)
    labels[1, 4:] = PAD  # a padded row
    labels[2, 0] = PAD  # and a position not scored
    return hidden, labels


def _reference(hidden, generator, labels, smoothing):
    logits = generator(hidden)  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=PAD, label_smoothing=smoothing)


def _both(generator, smoothing, chunk_rows, autocast=False):
    """(loss, grads) of the reference and of the projected loss, on the same inputs."""
    out = []
    for fn in (_reference, lambda h, g, y, s: projected_loss(h, g, y, PAD, s, chunk_rows=chunk_rows)):
        hidden, labels = _data()
        hidden.requires_grad_()
        generator.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = fn(hidden, generator, labels, smoothing)
        loss.backward()
        out.append((loss.detach(), hidden.grad, [p.grad.clone() for p in generator.parameters()]))
    return out


def _generator(name: str):
    torch.manual_seed(0)
    return registry.create("embedding", name, {"vocab_size": 24, "d_model": 16}, {}).generator


LINEAR_HEADS = ["tied", "untied", "two_way", "factorized"]


@pytest.mark.parametrize("name", LINEAR_HEADS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("chunk_rows", [1, 5, 4096])
def test_projected_loss_equals_full_logits_cross_entropy_in_fp32(name, smoothing, chunk_rows):
    (ref, ref_gx, ref_gw), (got, gx, gw) = _both(_generator(name), smoothing, chunk_rows)
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(gx, ref_gx, rtol=1e-5, atol=1e-7)
    for a, b in zip(gw, ref_gw):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["tied", "untied"])
def test_projected_loss_equals_full_logits_cross_entropy_under_bf16_autocast(name):
    (ref, ref_gx, ref_gw), (got, gx, gw) = _both(_generator(name), 0.1, 5, autocast=True)
    assert got.dtype == ref.dtype == torch.float32
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(gx, ref_gx, rtol=2e-2, atol=2e-3)
    for a, b in zip(gw, ref_gw):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-3)


def test_padded_positions_change_nothing_and_no_label_gives_nan_as_cross_entropy_does():
    gen = _generator("tied")
    hidden, labels = _data()
    changed = hidden.clone()
    changed[labels == PAD] = 1e4  # what padding positions hold must not matter
    a, b = (projected_loss(h, gen, labels, PAD, 0.1) for h in (hidden, changed))
    assert torch.equal(a, b)
    none = torch.full_like(labels, PAD)
    assert projected_loss(hidden, gen, none, PAD, 0.1).isnan() and _reference(hidden, gen, none, 0.1).isnan()


def test_the_heads_that_are_one_product_say_so_and_the_others_do_not():
    assert all(supports_projected_loss(_generator(n)) for n in LINEAR_HEADS)
    assert not any(supports_projected_loss(_generator(n)) for n in ("adaptive_softmax", "adaptive_input", "mos"))


def _system(*overrides: str) -> TransformerSystem:
    cfg = ablate.load_config(None, TINY + ["model.dropout=0", *overrides])
    torch.manual_seed(0)
    return TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def _batch():
    g = torch.Generator().manual_seed(1)
    tgt = torch.randint(3, 24, (4, 10), generator=g)
    tgt[2, 6:] = PAD
    return {"src_ids": torch.randint(3, 24, (4, 9), generator=g), "tgt_ids": tgt, "labels": tgt.roll(-1, 1)}


@pytest.mark.parametrize("embedding", ["tied", "adaptive_softmax", "mos"])
def test_the_training_loss_and_gradients_equal_the_full_logits_path(embedding):
    system = _system(f"model.embedding={embedding}")
    assert system.projected == (embedding == "tied")
    system.train()
    batch = _batch()
    grads = []
    for path in (system.training_loss, lambda b: system._token_losses(b, 0.1)[::3]):
        system.zero_grad(set_to_none=True)
        loss, _ = path(batch)
        loss.backward()
        grads.append((loss.detach(), [p.grad.clone() for p in system.parameters() if p.grad is not None]))
    (a, ga), (b, gb) = grads
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert len(ga) == len(gb)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def test_a_prefix_lm_scores_the_same_positions_on_the_projected_path():
    system = _system("model.arch=decoder_only", "model.mask=prefix_lm", "model.mask_args.prefix_len=4")
    assert system.projected
    tgt = _batch()["tgt_ids"]
    batch = {"ids": tgt, "labels": tgt.roll(-1, 1)}
    system.train()
    loss, _ = system.training_loss(batch)
    full, *_ = system._token_losses(batch, 0.1)
    torch.testing.assert_close(loss, full, rtol=1e-6, atol=1e-6)
