"""The GPU path: bf16-mixed training, the fused SDPA kernels, fused Adam with clipping, per-GPU pinning,
packing several runs on one GPU, cached decoding, and the memory estimate that packing relies on.

Marked ``gpu`` and skipped without CUDA (``pytest -m gpu`` runs only these). ``benchmarks/gpu.py`` measures
the same path's speed.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

import ablate
from ablate.decode import beam_search, greedy
from ablate.sweep.memory import training_bytes
from ablate.train.optimizer import adam
from ablate.train.run import train
from ablate.train.system import TransformerSystem
from tests.conftest import REPO, TINY, result_of

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ON_GPU = ["trainer.accelerator=gpu", "trainer.devices=1", "trainer.enable_progress_bar=false", "train.log_every=1"]
IDS = dict(bos_id=1, eos_id=2, pad_id=0)


def _cfg(*overrides: str):
    return ablate.load_config(None, TINY + ON_GPU + ["train.max_steps=6", "train.val_every=3", *overrides])


def _system(cfg) -> TransformerSystem:
    return TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)).cuda()


def _batch(cfg, batch_size: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    """A full batch of random tokens for the encoder-decoder (no padding), on the GPU."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, cfg.data.vocab_size, (batch_size, cfg.data.max_len), generator=g)
    tgt = torch.randint(3, cfg.data.vocab_size, (batch_size, cfg.data.max_len), generator=g)
    return {"src_ids": src.cuda(), "tgt_ids": tgt.cuda(), "labels": tgt.roll(-1, 1).cuda()}


def test_bf16_mixed_trains_on_the_gpu_with_fp32_weights(in_tmp):
    run_dir = train(_cfg("trainer.precision=bf16-mixed", "output_dir=run"))
    result = result_of(run_dir)
    assert result["status"] == "finished" and result["precision"] == "bf16-mixed"
    assert result["device"].startswith("cuda:0 (") and math.isfinite(result["final"]["val/loss"])
    state = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    assert {v.dtype for v in state.values() if v.is_floating_point()} == {torch.float32}  # mixed: fp32 master weights


def test_auto_precision_is_bf16_mixed_on_a_gpu_that_has_it(in_tmp):
    result = result_of(train(_cfg("trainer.precision=auto", "output_dir=run")))
    native = torch.cuda.is_bf16_supported(including_emulation=False)
    assert result["precision"] == ("bf16-mixed" if native else "32-true")


def test_bf16_autocast_computes_in_bf16_close_to_fp32():
    cfg = _cfg()
    torch.manual_seed(0)
    system = _system(cfg).eval()
    batch = _batch(cfg)
    with torch.no_grad():
        fp32 = system(batch)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            bf16 = system(batch)
    assert fp32.dtype == torch.float32 and bf16.dtype == torch.bfloat16
    assert (bf16.float() - fp32).abs().max() < 0.05 * fp32.abs().max()  # bf16 keeps ~3 significant digits


def _sdpa_kernels(system, batch) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, *_ = system._token_losses(batch, 0.1)
        loss.backward()
    return {e.key for e in prof.key_averages() if e.key.startswith("aten::_scaled_dot_product")}


def test_attention_runs_a_fused_sdpa_kernel_not_the_math_fallback():
    """With ablate's boolean masks, bf16 and d_k = 16 the memory-efficient (or flash / cuDNN) kernel runs."""
    cfg = _cfg("model.d_model=64", "model.n_heads=4")
    kernels = _sdpa_kernels(_system(cfg).train(), _batch(cfg))
    fused = {k for k in kernels if any(name in k for name in ("flash", "efficient", "cudnn"))}
    assert fused, kernels
    assert not any("math" in k for k in kernels), kernels


def test_adam_is_fused_on_cuda_and_takes_the_same_steps_as_unfused():
    t = OmegaConf.create({"betas": [0.9, 0.98], "eps": 1e-9, "weight_decay": 0.0, "grad_clip": None})
    torch.manual_seed(0)
    a, b = torch.nn.Linear(64, 64).cuda(), torch.nn.Linear(64, 64).cuda()
    b.load_state_dict(a.state_dict())
    fused = adam(a.parameters(), t, lr=1e-2)
    plain = torch.optim.Adam(b.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
    assert fused.param_groups[0]["fused"] and not plain.param_groups[0]["fused"]
    for _ in range(5):
        x = torch.randn(32, 64, device="cuda")
        for model, opt in ((a, fused), (b, plain)):
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_gradient_clipping_trains_with_either_precision(in_tmp, precision):
    """Lightning refuses to clip a fused optimizer's gradients under mixed precision: ablate then unfuses it."""
    result = result_of(train(_cfg(f"trainer.precision={precision}", "train.grad_clip=0.5", "output_dir=run")))
    assert result["status"] == "finished" and math.isfinite(result["final"]["val/loss"])


def _sweep(tmp_path, n_runs: int, *options: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    overrides = ", ".join(TINY + ["trainer.enable_progress_bar=false", "train.max_steps=40", "train.val_every=20"])
    rows = "\n".join(f"  - {{name: r{i}, seed: {i}}}" for i in range(n_runs))
    (tmp_path / "sweep.yaml").write_text(f"name: g\nbase: {{config: {REPO / 'configs/default.yaml'}, "
                                         f"overrides: [{overrides}]}}\nrows:\n{rows}\n")
    out = subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", "sweep.yaml", *options], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "sweeps" / "g").glob("runs/*/result.json"))]
    return out, results


def test_the_pool_pins_each_run_to_one_gpu_and_packs_k_per_gpu(tmp_path):
    n = torch.cuda.device_count()
    out, results = _sweep(tmp_path, 2 * n, "--runs-per-gpu", "2")
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(results) == 2 * n and {r["status"] for r in results} == {"finished"}
    assert all(r["device"].startswith("cuda:0 (") for r in results)  # each run sees exactly its one GPU
    by_gpu: dict[str, list[dict]] = {}
    for r in results:
        by_gpu.setdefault(r["visible_devices"], []).append(r)
    assert sorted(by_gpu) == [str(i) for i in range(n)] and all(len(rs) == 2 for rs in by_gpu.values())
    for first, second in by_gpu.values():  # packed: the two runs of a GPU trained at the same time
        assert first["started_at"] < second["started_at"] + second["wall_time_s"]
        assert second["started_at"] < first["started_at"] + first["wall_time_s"]


@pytest.mark.parametrize("positional", ["sinusoidal", "rope"])
def test_cached_decoding_on_the_gpu_equals_recomputing_and_the_cpu(positional):
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + ["data.vocab_size=40", f"model.positional={positional}"])
    model = ablate.build_model(cfg)
    src = torch.randint(3, 40, (5, 7), generator=torch.Generator().manual_seed(0))
    src[1, 3:] = src[3, 1:] = 0
    on_cpu = [search(model, src, max_len_b=12, **IDS) for search in (greedy, beam_search)]
    model, src = model.cuda(), src.cuda()
    for search, expected in zip((greedy, beam_search), on_cpu):
        cached = search(model, src, max_len_b=12, **IDS)
        assert cached == search(model, src, max_len_b=12, cache=False, **IDS) == expected


def test_the_memory_estimate_for_packing_covers_a_real_training_step():
    """--runs-per-gpu auto divides free memory by ablate.sweep.memory's estimate: it must not be below what a
    step really takes (forward, backward, Adam's step), or packed runs run out of memory."""
    cfg = ablate.load_config(None, ["logger=none", "model.n_layers=4", "model.d_model=256", "model.n_heads=8",
                                    "model.d_ff=1024", "data.vocab_size=8000", "data.max_len=64", "data.batch_size=64"])
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    system = _system(cfg).train()
    opt = adam(system.parameters(), cfg.train)
    for seed in range(2):  # the second step has Adam's moments allocated
        loss, *_ = system._token_losses(_batch(cfg, batch_size=cfg.data.batch_size, seed=seed), 0.1)
        loss.backward()
        opt.step()
        opt.zero_grad()
    peak = torch.cuda.max_memory_allocated() - before
    estimate = training_bytes(cfg, system.n_params["total"])
    assert peak < estimate - (1 << 30)  # without the 1 GiB the estimate adds for the CUDA context
