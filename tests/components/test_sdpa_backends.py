"""Every scaled_dot_product_attention backend that accepts ablate's boolean masks gives the math backend's output
and gradients, on the paper's head shape (h 8, d_k 64), with padding (+ causal) masks, at lengths with T % 128 == 64
included (where cuDNN's backward has given NaN gradients with a mask, pytorch#196678).

A backend that refuses the inputs ("No available kernel") is skipped with its reason: FLASH refuses a mask on the
GPU. On the CPU the cases run in fp32; on a GPU (marked ``gpu``) in bf16, against the math backend in fp32.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, D_K = 3, 8, 64
BACKENDS = [b for b in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH") if hasattr(SDPBackend, b)]
LENGTHS = [(13, 11), (64, 64), (192, 200)]  # (T, S): T % 128 == 64 among them
DEVICES = [pytest.param("cpu", torch.float32, id="cpu"),
           pytest.param("cuda", torch.bfloat16, id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
               not torch.cuda.is_available(), reason="needs a CUDA device")])]


def _case(role: str, T: int, S: int, device: str):
    """(q, k, v, mask) as ablate makes them: (B, h, T_q, d_k) ..., mask (B, 1, T_q|1, T_k), True = may attend."""
    g = torch.Generator().manual_seed(T)
    t_q, t_k = (S, S) if role == "encoder self" else (T, S) if role == "cross" else (T, T)
    q, k, v = (torch.randn(B, H, n, D_K, generator=g) for n in (t_q, t_k, t_k))
    real = torch.tensor([t_k, t_k - 3, max(t_k // 2, 1)])  # (B,): row 1 and 2 padded at the end
    mask = (torch.arange(t_k)[None, :] < real[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
    if role == "decoder self":
        mask = mask & torch.ones(t_q, t_k, dtype=torch.bool).tril()  # (B, 1, T, T)
    return [x.to(device) for x in (q, k, v, mask)]


def _run(backend: str, q, k, v, mask, dtype):
    q, k, v = (x.to(dtype).detach().requires_grad_() for x in (q, k, v))
    with sdpa_kernel(getattr(SDPBackend, backend)), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, T_q, d_v)
    grad = torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out).to(dtype)
    out.backward(grad)
    return [x.float() for x in (out, q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("device,dtype", DEVICES)
@pytest.mark.parametrize("T,S", LENGTHS)
@pytest.mark.parametrize("role", ["encoder self", "decoder self", "cross"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_gives_the_math_backends_output_and_gradients(backend, role, T, S, device, dtype):
    q, k, v, mask = _case(role, T, S, device)
    try:
        got = _run(backend, q, k, v, mask, dtype)
    except RuntimeError as exc:
        pytest.skip(f"{backend} refuses ablate's {role} mask here: {str(exc).strip().splitlines()[0][:80]}")
    reference = _run("MATH", q, k, v, mask, torch.float32)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, reference):
        assert torch.isfinite(a).all(), f"{backend} gives non-finite {name}"
        torch.testing.assert_close(a, b, **tol, msg=lambda m: f"{backend} {name}: {m}")


def test_the_math_backend_agrees_with_the_softmax_written_out():
    q, k, v, mask = _case("decoder self", 64, 64, "cpu")
    out, *_ = _run("MATH", q, k, v, mask, torch.float32)
    scores = (q @ k.transpose(-2, -1) / D_K**0.5).masked_fill(~mask, float("-inf"))  # (B, h, T, T)
    torch.testing.assert_close(out, scores.softmax(-1) @ v, rtol=1e-5, atol=1e-5)
