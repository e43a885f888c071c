"""A whole model with FlexAttention's block masks (``trainer.attention_kernel: flex``) trains as with SDPA's boolean
masks: the same training losses and gradients over a few Adam steps (not the weights: Adam turns the rounding noise of
a gradient that is zero in exact arithmetic, the key projection's bias's, into a step of lr), the same validation
logits,
the same attention weights for inspection, on batches with rows padded at the end, at the start and entirely.

On the CPU flex's backward needs torch's guard lifted (``cpu_backward``, see tests/components/test_flex.py).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from omegaconf import OmegaConf

import ablate
from ablate.components import flex
from ablate.model.inspect import attention_weights
from ablate.train.system import TransformerSystem
from tests.components.test_flex import cpu_backward  # noqa: F401  (a fixture)
from tests.conftest import TINY

CASES = [("encoder_decoder", "causal"), ("decoder_only", "causal"), ("decoder_only", "prefix_lm"),
         ("decoder_only", "local_global")]
PAD, V, B, T = 0, 24, 4, 12


def _config(arch: str, mask: str) -> dict:
    cfg = ablate.load_config(None, TINY + [f"model.arch={arch}", f"model.mask={mask}", "model.dropout=0.1",
                                           "model.mask_args={}" if mask == "causal" else
                                           "model.mask_args={prefix_len: 4}" if mask == "prefix_lm" else
                                           "model.mask_args={window: 3}"])
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)


def _padded(g: torch.Generator, length: int) -> torch.Tensor:
    """(B, length) ids: row 0 whole, row 1 padded at the end, row 2 at the start, row 3 all padding (a filler)."""
    ids = torch.randint(3, V, (B, length), generator=g)
    ids[1, length - 4:] = PAD
    ids[2, :3] = PAD
    ids[3] = PAD
    return ids


def _batches(arch: str, n: int = 3) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    out = []
    for _ in range(n):
        ids = _padded(g, T)
        labels = torch.roll(ids, -1, dims=1).masked_fill(ids == PAD, PAD)  # (B, T)
        batch = {"ids": ids} if arch == "decoder_only" else {"src_ids": _padded(g, T - 2), "tgt_ids": ids}
        out.append({**batch, "labels": labels})
    return out


@pytest.fixture
def flex_calls(monkeypatch) -> list[int]:
    """Counts the attention calls flex computes (a test that never reached flex would compare SDPA with itself)."""
    calls, attend = [], flex.attend
    monkeypatch.setattr(flex, "attend", lambda *args: calls.append(1) or attend(*args))
    return calls


def _system(config: dict, form: str) -> TransformerSystem:
    torch.manual_seed(0)
    system = TransformerSystem(config)
    if form == "flex":
        system.model.mask_form = flex.block_mask
    return system


def _train(config: dict, form: str, batches: list[dict], device: str = "cpu") -> tuple[list, list]:
    """The losses and gradients of a few Adam steps (dropout on, the same draws in both)."""
    system = _system(config, form).to(device).train()
    batches = [{k: v.to(device) for k, v in b.items()} for b in batches]
    opt = torch.optim.Adam(system.parameters(), lr=1e-3)
    losses, grads = [], []
    for i, batch in enumerate(batches):
        torch.manual_seed(100 + i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # eager flex warns that it is the unfused reference
            loss, _ = system.training_loss(batch)
        opt.zero_grad()
        loss.backward()
        losses.append(loss.detach().cpu())
        grads.append({n: p.grad.cpu() for n, p in system.named_parameters() if p.grad is not None})
        opt.step()
    return losses, grads


def _check_training(arch: str, mask: str, calls: list[int], device: str, tol: dict) -> None:
    config, batches = _config(arch, mask), _batches(arch)
    l_sdpa, g_sdpa = _train(config, "sdpa", batches, device)
    assert not calls
    l_flex, g_flex = _train(config, "flex", batches, device)
    layers = 2 * 3 if arch == "encoder_decoder" else 2  # TINY: 2 layers a stack; a decoder layer attends twice
    assert len(calls) == len(batches) * layers
    torch.testing.assert_close(torch.stack(l_flex), torch.stack(l_sdpa), **tol)
    for step, (a, b) in enumerate(zip(g_flex, g_sdpa)):
        assert a.keys() == b.keys() and len(a) > 10
        for name in a:
            assert torch.isfinite(a[name]).all(), f"step {step}: {name} has a non-finite gradient"
            torch.testing.assert_close(a[name], b[name], **tol, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("arch,mask", CASES)
def test_training_with_flex_gives_sdpas_losses_and_gradients(arch, mask, cpu_backward, flex_calls):  # noqa: F811
    _check_training(arch, mask, flex_calls, "cpu", {"rtol": 1e-4, "atol": 1e-6})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("arch,mask", CASES)
def test_training_with_compiled_flex_on_cuda_gives_sdpas_losses_and_gradients(arch, mask, flex_calls):
    _check_training(arch, mask, flex_calls, "cuda", {"rtol": 1e-3, "atol": 1e-5})


@pytest.mark.parametrize("arch,mask", CASES[:2])
def test_validation_logits_and_inspected_weights_are_sdpas(arch, mask):
    config, batch = _config(arch, mask), _batches(arch, 1)[0]
    out = {}
    for form in ("sdpa", "flex"):
        system = _system(config, form).eval()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logits = system(batch)  # (B, T, V)
            with attention_weights(system.model) as weights:  # the explicit softmax: NaN where a query sees no key
                system(batch)
        out[form] = logits, weights
    assert torch.isfinite(out["flex"][0]).all()  # the filler row and the left-padded row's first positions too
    torch.testing.assert_close(out["flex"][0], out["sdpa"][0], rtol=1e-5, atol=1e-5)
    assert out["flex"][1].keys() == out["sdpa"][1].keys() and out["flex"][1]
    for name, w in out["sdpa"][1].items():
        torch.testing.assert_close(out["flex"][1][name], w, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_cached_decoding_keeps_boolean_masks(flex_calls):
    model = _system(_config("encoder_decoder", "causal"), "flex").model.eval()
    src, tgt = _batches("encoder_decoder", 1)[0]["src_ids"][:3], torch.full((3, 1), 1)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = model(src, tgt)  # (3, 1, V): block masks
        assert len(flex_calls) == 2 + 2 * 2
        step = model.decode_step(tgt, model.start_decoding(src))  # cached: boolean masks, SDPA
    assert len(flex_calls) == 6 + 2  # then the encoder's layers only: the cached decoder's are SDPA's
    torch.testing.assert_close(step, full, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_compiled_model_with_block_masks_gives_sdpas_output():
    """``trainer.compile`` with flex: the masks are made outside the graph, flex compiled with the model (forward
    only: torch refuses flex's backward on the CPU)."""
    config, batch = _config("encoder_decoder", "causal"), _batches("encoder_decoder", 1)[0]
    model = _system(config, "sdpa").model.eval()
    with torch.no_grad():
        reference = model.hidden(batch["src_ids"], batch["tgt_ids"])  # (B, T, d_model)
        model.mask_form = flex.block_mask
        compiled = torch.compile(model.hidden, dynamic=False)(batch["src_ids"], batch["tgt_ids"])
    torch.testing.assert_close(compiled, reference, rtol=1e-5, atol=1e-5)
