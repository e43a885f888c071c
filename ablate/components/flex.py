"""FlexAttention for ablate's masks (``trainer.attention_kernel: flex``): the same attention as SDPA's, computed by
``torch.nn.attention.flex_attention`` over a block mask, which skips the blocks of keys a query may not see
(padding, the future) instead of reading a boolean mask and the scores of those keys.

A block mask is built once per forward from what today's boolean mask is made of: each row's key padding (B, T_k),
True where the key is a real token, and the decoder mask's allowed pairs (T_q, T_k) (None: every pair), and shared
by the layers that share the mask. Queries are not masked, as with SDPA: a padded query attends to the real keys
it may see; a query that may see none (a left-padded causal row, a filler row) gives zeros, as SDPA's does.

On CUDA the kernel runs through ``torch.compile`` (flex's fused Triton kernel; eager flex is an unfused reference
that materialises the scores). Elsewhere it runs eagerly, and torch (2.13) refuses flex's backward on the CPU:
:func:`why_not_here` says so, and ablate trains there with SDPA.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, create_mask, flex_attention

CPU_REASON = f"torch {torch.__version__.split('+')[0]} has no FlexAttention backward on the {{device}}"


def why_not_here(device: torch.device) -> str | None:
    """Why flex cannot train on ``device``: torch refuses its backward on the CPU (and MPS; torch 2.13), and ablate
    compiles it for CUDA only; None on CUDA."""
    if device.type in ("cpu", "mps"):
        return CPU_REASON.format(device=device.type)
    return None if device.type == "cuda" else f"ablate trains with FlexAttention on CUDA only, not on {device.type}"


@torch.compiler.disable
def block_mask(padding: torch.Tensor, pairs: torch.Tensor | None, t_q: int) -> BlockMask:
    """Key padding (B, 1, 1, T_k) and allowed pairs (T_q, T_k) or None -> a BlockMask (B, 1, T_q, T_k); True = may
    attend, as the boolean mask ``padding & pairs`` is.

    Made outside a compiled model (a graph break): inductor cannot lower a mask that reads tensors made inside the
    graph (torch 2.13, CPU: "No choices to select"); made here, they enter the compiled graph as its inputs."""
    real = padding[:, 0, 0, :]  # (B, T_k)
    B, t_k = real.shape
    if pairs is None:
        def allowed(b, h, q, kv):
            return real[b, kv]
    else:
        def allowed(b, h, q, kv):
            return real[b, kv] & pairs[q, kv]
    return create_block_mask(allowed, B, None, t_q, t_k, device=real.device)


def dense(mask: torch.Tensor | BlockMask | None) -> torch.Tensor | None:
    """A block mask as the boolean mask (B, 1, T_q, T_k) it stands for (for :attr:`keep_weights`' explicit softmax);
    a boolean mask or None as it is."""
    if not isinstance(mask, BlockMask):
        return mask
    B, _, t_q, t_k = mask.shape
    return create_mask(mask.mask_mod, B, 1, t_q, t_k, device=mask.kv_num_blocks.device)


@lru_cache(maxsize=None)
def _compiled() -> Callable[..., torch.Tensor]:
    """flex_attention through torch.compile: one compiled kernel per shape, shared by every layer."""
    return torch.compile(flex_attention, dynamic=False)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: BlockMask, scale: float) -> torch.Tensor:
    """softmax(q k^T * scale, masked) v: q (B, h, T_q, d_k), k (B, h, T_k, d_k), v (B, h, T_k, d_v) -> (B, h, T_q,
    d_v). Compiled on CUDA; inside a compiled model (``trainer.compile``) it is compiled with the model."""
    if torch.compiler.is_compiling():  # inductor's flex lowering refuses a view of the projection (torch 2.13)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    elif q.device.type == "cuda":
        return _compiled()(q, k, v, block_mask=mask, scale=scale)
    return flex_attention(q, k, v, block_mask=mask, scale=scale)
