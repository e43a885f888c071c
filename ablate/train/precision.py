"""``trainer.precision=auto``: bf16-mixed where the machine computes bf16 natively, fp32 where it would emulate it.

Natively: a CUDA GPU from Ampere on, or a CPU with the AVX512-BF16 or AMX instructions (oneDNN's own
``is_mkldnn_bf16_supported`` also says yes for plain AVX-512, where it emulates bf16, so ablate asks for the
instructions). On such a CPU ``benchmarks/train_step.py`` measured bf16-mixed at 1.67x fp32's tokens/s (the
Multi30k model, one thread, 2026-11-25); on an AVX2-only CPU bf16 is emulated and was 7-18x slower than fp32,
so auto stays fp32 there.
Any other value is Lightning's and passes through; the run's ``result.json`` records what was used.
"""

from __future__ import annotations

import torch


GPU_ACCELERATORS = ("auto", "gpu", "cuda")  # Lightning's names that train on a CUDA GPU when there is one


def bf16_native(device: str = "cuda") -> bool:
    """Whether ``device`` (``cuda`` when a GPU is available, else ``cpu``) runs bf16 matmuls natively (a GPU
    before Ampere emulates them: torch's default check would count it)."""
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.is_bf16_supported(including_emulation=False)
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):  # a torch without these probes (not x86): fp32
        return False


def resolve_precision(precision: str, accelerator: str = "auto") -> str:
    """The Lightning precision a run uses: ``auto`` resolved for the device ``accelerator`` picks (fp32 on any
    other accelerator, e.g. ``mps``)."""
    if precision != "auto":
        return precision
    if str(accelerator) in GPU_ACCELERATORS:
        return "bf16-mixed" if bf16_native("cuda") else "32-true"
    return "bf16-mixed" if str(accelerator) == "cpu" and bf16_native("cpu") else "32-true"
