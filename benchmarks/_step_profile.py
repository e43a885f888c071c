"""The training step of ``gpu.py`` with each of issue 30's changes switchable, its timing, where its time goes,
and the bf16 matmul peak it is measured against.

A step: forward (eager or ``torch.compile(model.hidden, dynamic=False)``), the loss (full logits +
``F.cross_entropy``, or :func:`ablate.train.loss.projected_loss`), backward, Adam (fused on CUDA). No host sync
inside the step: the loss stays on the device; timing brackets many steps with CUDA events.

The split of a step (``split``): the profiler's device kernels (CPU ops on a CPU), each put in the first category
whose name fragment it holds, summed; ``idle`` is the step's wall time minus the busy time (launch gaps, host work).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

import _common as C

PAD, SMOOTHING = 0, 0.1
# (category, kernel / op name fragments, lower case); first match wins; everything else is "elementwise". Compiled
# FlexAttention runs Triton templates (triton_tem_*); inductor's matmuls go to cuBLAS unless max-autotune is on.
KERNEL_CATEGORIES = [
    ("attention", ("fmha", "flash", "sdpa", "attention", "scaled_dot_product", "flex", "triton_tem")),
    ("loss", ("softmax", "nll_loss", "cross_entropy", "logsumexp", "linearcrossentropy")),
    ("optimiser", ("adam", "multi_tensor", "_foreach")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul", "gemv", "addmm", "aten::mm", "bmm",
                "linear", "mkldnn")),
]
CATEGORIES = [name for name, _ in KERNEL_CATEGORIES] + ["elementwise", "idle"]


def make_step(model: torch.nn.Module, *, device: str, projected: bool, compiled: bool) -> Callable[[dict], Any]:
    """One bf16-autocast training step of an encoder-decoder ``model`` on a batch dict (:func:`_common.train_step`,
    with no sync inside it); returns the loss tensor."""
    hidden = torch.compile(model.hidden, dynamic=False) if compiled else model.hidden

    def forward(batch: dict) -> torch.Tensor:
        h = hidden(batch["src_ids"], batch["tgt_ids"])  # (B, T, d_model)
        return h if projected else model.generator(h)  # (B, T, V) for the full-logit loss

    return C.train_step(model, forward, precision="bf16", device=device, label_smoothing=SMOOTHING, pad_id=PAD,
                        fused_adam=device == "cuda", projected=projected, sync=False)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(step: Callable[[dict], Any], batches: list[dict], device: str) -> float:
    """Seconds per step over ``batches``, one sync at the end only (the steps queue up as in training)."""
    _sync(device)
    t0 = time.perf_counter()
    for b in batches:
        step(b)
    _sync(device)
    return (time.perf_counter() - t0) / len(batches)


def category(name: str) -> str:
    low = name.lower()
    return next((c for c, keys in KERNEL_CATEGORIES if any(k in low for k in keys)), "elementwise")


def split(step: Callable[[dict], Any], batches: list[dict], device: str) -> dict[str, float]:
    """Milliseconds per step in each of :data:`CATEGORIES`, over ``batches`` profiled."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    _sync(device)
    t0 = time.perf_counter()
    with profile(activities=activities) as p:
        for b in batches:
            step(b)
        _sync(device)
    wall_ms = (time.perf_counter() - t0) * 1e3 / len(batches)
    out = dict.fromkeys(CATEGORIES, 0.0)
    if device == "cuda":  # device kernels: their own durations
        for e in p.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                out[category(e.name)] += e.time_range.elapsed_us() / 1e3 / len(batches)
    else:  # CPU ops: self time, so nested ops are not counted twice
        for e in p.key_averages():
            if not e.key.startswith("phase: "):
                out[category(e.key)] += e.self_cpu_time_total / 1e3 / len(batches)
    out["idle"] = max(0.0, wall_ms - sum(out.values()))
    out["wall"] = wall_ms
    return out


def matmul_peak_tflops(device: str, n: int = 8192, reps: int = 20) -> float:
    """Dense bf16 matmul TFLOP/s measured here: the best of ``reps`` n x n x n products (2 n^3 FLOPs each)."""
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    best = float("inf")
    for _ in range(reps + 3):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12
