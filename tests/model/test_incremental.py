"""Incremental decoding with cached keys and values gives the logits of the full forward pass.

Generated from the registry: every attention variant with every positional component and decoder mask,
and every variant of every other model kind with the defaults.
"""

from __future__ import annotations

import pytest
import torch

import ablate
from ablate import registry
from tests.conftest import TINY

CASES = [(a, p, m) for a in registry.names("attention") for p in registry.names("positional")
         for m in registry.names("mask")]
CROSSED = {"attention", "positional", "mask"}
OTHER = [(k.name, name) for k in registry.kinds().values() if k.section == "model" and k.name not in CROSSED
         for name in registry.names(k.name)]


def _model(overrides: list[str]) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + ["data.vocab_size=40", "model.mask_args={}", *overrides])
    return ablate.build_model(cfg).eval()


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, 40, (3, 7), generator=g)  # (B, S)
    tgt = torch.randint(3, 40, (3, 9), generator=g)  # (B, T)
    src[0, 4:] = 0  # source padding
    tgt[:, 0] = 1  # BOS
    tgt[2, 6:] = 0  # target padding at the end, as in a teacher-forced batch
    return src, tgt


def _stepwise(model: torch.nn.Module, src: torch.Tensor, tgt: torch.Tensor, chunks: list[int]) -> torch.Tensor:
    """Logits (B, T, V) from decode_step on consecutive chunks of tgt."""
    state, out, start = model.start_decoding(src), [], 0
    for size in chunks:
        out.append(model.decode_step(tgt[:, start : start + size], state))
        start += size
    assert state.length == tgt.size(1)
    return torch.cat(out, dim=1)


def _mask_args(mask: str) -> list[str]:
    # Windows and prefixes shorter than the target, so that they change something.
    return {"sliding_window": ["model.mask_args.window=3"], "prefix_lm": ["model.mask_args.prefix_len=3"],
            "local_global": ["model.mask_args.window=3"]}.get(mask, [])


@pytest.mark.parametrize("attention,positional,mask", CASES, ids=["-".join(c) for c in CASES])
def test_cached_steps_equal_the_full_pass(attention, positional, mask):
    model = _model([f"model.attention={attention}", f"model.positional={positional}", f"model.mask={mask}",
                    *_mask_args(mask)])
    src, tgt = _batch()
    with torch.no_grad():
        full = model(src, tgt)  # (B, T, V)
        if not model.incremental:  # the mask looks ahead: earlier positions change as tokens arrive
            with pytest.raises(ValueError, match="attend to later"):
                model.start_decoding(src)
            return
        one_by_one = _stepwise(model, src, tgt, [1] * tgt.size(1))
        prefill_then_steps = _stepwise(model, src, tgt, [4, 1, 3, 1])
    real = tgt != 0  # (B, T): logits at padded target positions are never used
    torch.testing.assert_close(one_by_one[real], full[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(prefill_then_steps[real], full[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind,name", OTHER, ids=[f"{k}={n}" for k, n in OTHER])
def test_cached_steps_equal_the_full_pass_for_other_components(kind, name):
    model = _model([f"model.{kind}={name}"])
    src, tgt = _batch()
    with torch.no_grad():
        full, steps = model(src, tgt), _stepwise(model, src, tgt, [1] * tgt.size(1))
    real = tgt != 0
    torch.testing.assert_close(steps[real], full[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("mask", ["none", "prefix_lm"])
def test_masks_that_look_ahead_would_make_a_cache_go_stale(mask):
    """Why start_decoding refuses them: forcing a cache on gives logits that differ from the full pass."""
    model = _model([f"model.mask={mask}", *_mask_args(mask)])
    src, tgt = _batch()
    src, tgt = src[1:2], tgt[1:2, :6]  # one sentence, no padding
    model.incremental = True
    with torch.no_grad():
        steps = _stepwise(model, src, tgt, [1] * tgt.size(1))  # (1, T, V)
        prefixes = torch.stack([model(src, tgt[:, : t + 1])[0, -1] for t in range(tgt.size(1))])  # (T, V)
    torch.testing.assert_close(steps[0, 0], prefixes[0], atol=1e-5, rtol=0)  # the first step sees the same
    assert not torch.allclose(steps[0, 1:], prefixes[1:], atol=1e-3)  # later ones would not


def test_the_gqa_cache_holds_only_the_key_value_heads():
    model = _model(["model.attention=gqa", "model.attention_args.n_kv_heads=2"])  # 4 query heads
    src, tgt = _batch()
    state = model.start_decoding(src)
    model.decode_step(tgt[:, :3], state)
    self_kv, memory_kv = state.layers[0].self_attn, state.layers[0].cross_attn
    assert self_kv.k.shape == (3, 2, 3, 8) and self_kv.v.shape == (3, 2, 3, 8)  # (B, h_kv, T, d)
    assert memory_kv.k.shape == (3, 2, 7, 8)
