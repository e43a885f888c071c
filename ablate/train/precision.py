"""``trainer.precision=auto``: bf16-mixed where the machine computes bf16 natively and the model is wide enough for it
to pay, fp32 elsewhere.

Natively: a CUDA GPU from Ampere on, or a CPU with the AVX512-BF16 or AMX instructions (oneDNN's own
``is_mkldnn_bf16_supported`` also says yes for plain AVX-512, where it emulates bf16, so ablate asks for the
instructions). On an AVX2-only CPU bf16 is emulated, several times slower than fp32, so auto stays fp32 there.

Wide enough (CPU): autocast casts the weights and activations around every matmul, a cost that grows with
d_model while the matmul's grows with d_model squared, so bf16 pays only above a width. ``benchmarks/precision.py``
measures fp32 ms / bf16 ms of ablate's step at each width (its output, with the machine's, is in docs/performance.md):
bf16 pays from d_model 256 up on an AVX512-BF16 CPU, ``BF16_MIN_D_MODEL``. So the quickstart's d_model 64 trains in
fp32, and the Multi30k model (d_model 256) in bf16-mixed. On a GPU the width is not consulted (not measured there).
Any other value is Lightning's and passes through; the run's ``result.json`` records what was used.
"""

from __future__ import annotations

import torch


GPU_ACCELERATORS = ("auto", "gpu", "cuda")  # Lightning's names that train on a CUDA GPU when there is one
BF16_MIN_D_MODEL = 256  # on a CPU, auto picks bf16-mixed from this d_model up (benchmarks/precision.py, above)


def bf16_native(device: str = "cuda") -> bool:
    """Whether ``device`` (``cuda`` when a GPU is available, else ``cpu``) runs bf16 matmuls natively (a GPU
    before Ampere emulates them: torch's default check would count it)."""
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.is_bf16_supported(including_emulation=False)
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):  # a torch without these probes (not x86): fp32
        return False


def resolve_precision(precision: str, accelerator: str = "auto", d_model: int | None = None) -> str:
    """The Lightning precision a run uses: ``auto`` resolved for the device ``accelerator`` picks (fp32 on any
    other accelerator, e.g. ``mps``) and, on a CPU, the model's width ``d_model`` (bf16-mixed from
    ``BF16_MIN_D_MODEL`` up; None: the width is not known, the device alone decides)."""
    if precision != "auto":
        return precision
    if str(accelerator) in GPU_ACCELERATORS:  # bf16_native("cuda") asks the CPU where there is no GPU
        native, on_cpu = bf16_native("cuda"), not torch.cuda.is_available()
    elif str(accelerator) == "cpu":
        native, on_cpu = bf16_native("cpu"), True
    else:
        return "32-true"
    narrow = on_cpu and d_model is not None and d_model < BF16_MIN_D_MODEL
    return "bf16-mixed" if native and not narrow else "32-true"


def run_precision(cfg) -> str:
    """The precision a run of ``cfg`` (a resolved run config) trains with: what its Trainer is given and what its
    ``result.json`` records, solo or as a seed array's member (at its model's width)."""
    return resolve_precision(cfg.trainer.precision, cfg.trainer.accelerator, cfg.model.d_model)
