"""FlexAttention over ablate's block masks (:mod:`ablate.components.flex`) gives the math SDPA backend's output and
gradients over the boolean masks they stand for: on the paper's head shape (h 8, d_k 64), for every role (encoder
self, decoder self, cross), with rows padded at the end, at the start and entirely, at lengths with T % 128 == 64
included (where cuDNN's backward has given NaN gradients with a mask, pytorch#196678).

torch 2.13 refuses flex's backward on the CPU with a guard in ``flex_attention`` (``_validate_device``); below it, the
eager path is flex's reference implementation with its autograd, which the CPU cases run by lifting the guard
(``cpu_backward``). ``ablate train`` does not lift it: on the CPU a flex run trains with SDPA
(tests/train/test_kernels.py). The compiled CPU kernel is checked forward only; the GPU cases (marked ``gpu``) run
compiled flex in bf16 against the math backend in fp32.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.attention.flex_attention as torch_flex
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ablate.components import flex

B, H, D_K = 4, 8, 64
LENGTHS = [(13, 11), (64, 64), (192, 200)]  # (T, S): T % 128 == 64 among them
ROLES = ["encoder self", "decoder self", "cross"]


@pytest.fixture
def cpu_backward(monkeypatch):
    """Lift torch's guard against flex's backward on the CPU (see the module docstring)."""
    monkeypatch.setattr(torch_flex, "_validate_device", lambda *tensors: None)


def key_padding(t_k: int) -> torch.Tensor:
    """(B, 1, 1, T_k), True = a real key: row 0 whole, row 1 padded at the end, row 2 at the start (left padding:
    its first causal queries see no key), row 3 entirely padding (a filler row)."""
    j = torch.arange(t_k)
    real = torch.stack([j >= 0, j < t_k - 3, j >= t_k // 3, j < 0])  # (B, T_k)
    return real[:, None, None, :]


def case(role: str, T: int, S: int, device: str = "cpu"):
    """(q, k, v, key padding (B, 1, 1, T_k), allowed pairs (T_q, T_k) or None) as ablate's model makes them."""
    g = torch.Generator().manual_seed(T + S)
    t_q, t_k = (S, S) if role == "encoder self" else (T, S) if role == "cross" else (T, T)
    q, k, v = (torch.randn(B, H, n, D_K, generator=g) for n in (t_q, t_k, t_k))
    pairs = torch.ones(t_q, t_k, dtype=torch.bool).tril() if role == "decoder self" else None
    return [x.to(device) for x in (q, k, v, key_padding(t_k))], None if pairs is None else pairs.to(device)


def run(attention, q, k, v, dtype=torch.float32):
    """attention(q, k, v) -> [output, dq, dk, dv] in fp32, from a fixed output gradient."""
    q, k, v = (x.to(dtype).detach().requires_grad_() for x in (q, k, v))
    out = attention(q, k, v)  # (B, h, T_q, d_v)
    out.backward(torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out).to(dtype))
    return [x.float() for x in (out, q.grad, k.grad, v.grad)]


def math_sdpa(mask: torch.Tensor):
    def attention(q, k, v):
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=D_K**-0.5)
    return attention


def flex_with(block_mask):
    def attention(q, k, v):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # eager flex warns that it is the unfused reference
            return flex.attend(q, k, v, block_mask, D_K**-0.5)
    return attention


def boolean(padding: torch.Tensor, pairs: torch.Tensor | None) -> torch.Tensor:
    return padding if pairs is None else padding & pairs


@pytest.mark.parametrize("T,S", LENGTHS)
@pytest.mark.parametrize("role", ROLES)
def test_flex_gives_the_math_backends_output_and_gradients(role, T, S, cpu_backward):
    (q, k, v, padding), pairs = case(role, T, S)
    got = run(flex_with(flex.block_mask(padding, pairs, q.size(2))), q, k, v)
    reference = run(math_sdpa(boolean(padding, pairs)), q, k, v)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, reference):
        assert torch.isfinite(a).all(), f"flex gives non-finite {name}"
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def test_queries_that_may_see_no_key_give_zeros_as_sdpa_does(cpu_backward):
    (q, k, v, padding), pairs = case("decoder self", 64, 64)
    out, dq, _, _ = run(flex_with(flex.block_mask(padding, pairs, 64)), q, k, v)
    blind = ~boolean(padding, pairs).any(-1)[:, 0]  # (B, T_q): the left-padded row's first queries, the filler row
    assert blind[2, : 64 // 3].all() and blind[3].all() and not blind[:2].any()
    assert out[blind.unsqueeze(1).expand(-1, H, -1)].abs().max() == 0
    assert dq[blind.unsqueeze(1).expand(-1, H, -1)].abs().max() == 0


def test_dense_gives_back_the_boolean_mask_a_block_mask_stands_for():
    (_, _, _, padding), pairs = case("decoder self", 192, 200)
    made = flex.dense(flex.block_mask(padding, pairs, 192))  # (B, 1, T, T)
    assert torch.equal(made, boolean(padding, pairs).expand_as(made))
    assert flex.dense(padding) is padding and flex.dense(None) is None


def test_flex_refuses_to_train_off_cuda_and_says_why():
    assert flex.why_not_here(torch.device("cuda")) is None
    assert "no FlexAttention backward on the cpu" in flex.why_not_here(torch.device("cpu"))
    q = torch.randn(1, 1, 4, 8, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):  # what the reason stands for
        torch_flex.flex_attention(q, q, q)


@pytest.mark.slow
def test_compiled_flex_on_the_cpu_gives_the_math_backends_output():
    """The compiled path (what CUDA runs) on the CPU, forward only: torch refuses its backward here (above)."""
    (q, k, v, padding), pairs = case("decoder self", 64, 64)
    compiled = torch.compile(torch_flex.flex_attention, dynamic=False)
    out = compiled(q, k, v, block_mask=flex.block_mask(padding, pairs, 64), scale=D_K**-0.5)
    torch.testing.assert_close(out, math_sdpa(boolean(padding, pairs))(q, k, v), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("T,S", LENGTHS)
@pytest.mark.parametrize("role", ROLES)
def test_compiled_flex_on_cuda_in_bf16_gives_the_math_backends_output_and_gradients(role, T, S):
    (q, k, v, padding), pairs = case(role, T, S, "cuda")
    got = run(flex_with(flex.block_mask(padding, pairs, q.size(2))), q, k, v, torch.bfloat16)
    reference = run(math_sdpa(boolean(padding, pairs)), q, k, v)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, reference):
        assert torch.isfinite(a).all(), f"flex gives non-finite {name}"
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2, msg=lambda m: f"{name}: {m}")
