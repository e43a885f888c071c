"""benchmarks/gpu.py without a GPU: the one line it prints, its tiny CPU run (every contender, the split, MFU), and
how it sorts kernel names into the parts of a step."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import _step_profile as P  # noqa: E402


@pytest.mark.parametrize("name,part", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "matmul"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", "attention"),
    ("triton_tem_fused_0", "attention"),  # an inductor Triton template: compiled flex attention's kernels
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "loss"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimiser"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "elementwise"),
])
def test_kernel_names_fall_into_the_parts_of_a_step(name, part):
    assert P.category(name) == part


def _run(*args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "gpu.py", *args], cwd=REPO / "benchmarks", env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON "))
    return out, json.loads(line.removeprefix("BENCH_JSON "))


def test_without_cuda_it_says_so_in_one_line_and_exits_0():
    out, blob = _run()
    assert "no CUDA device here, nothing measured" in out.stdout and blob["results"] == {"skipped": "no CUDA device"}


@pytest.mark.slow  # three tiny contenders, profiled: tens of seconds on a shared CPU
def test_the_cpu_run_times_every_contender_and_splits_its_step():
    out, blob = _run("--cpu", "--threads", "1")
    r = blob["results"]
    steps = r["steps"]
    assert [s["flags"] for s in steps.values()] == [
        {"projected": False, "bucket": False, "compiled": False, "flex": False},
        {"projected": True, "bucket": False, "compiled": False, "flex": False},
        {"projected": True, "bucket": True, "compiled": False, "flex": False},  # no compile on a CPU
        {"projected": True, "bucket": True, "compiled": False, "flex": True}]
    assert [s["attention_kernel"] for s in steps.values()] == ["sdpa"] * 4  # no flex backward on a CPU: said once
    assert out.stdout.count("trainer.attention_kernel=flex: training with SDPA instead (") == 1
    for s in steps.values():
        flops = s["tokens_per_s"] * r["flops_per_token"]
        assert s["mfu_measured"] == pytest.approx(flops / (r["peak_tflops_measured"] * 1e12))
        split = s["split_ms"]
        busy = sum(split[c] for c in P.CATEGORIES if c != "idle")
        assert all(split[c] >= 0 for c in P.CATEGORIES) and busy > 0
        assert split["idle"] == pytest.approx(max(0.0, split["wall"] - busy))
    assert list(steps.values())[2]["shapes"] <= 64 // 16  # lengths up to 61 tokens, buckets of 16
