"""The output layer and its label-smoothed cross-entropy without the full (B, T, V) logits.

With ~25k target tokens a batch and V ~ 37k, the paper's base model's logits are 25k x 37k: in fp32 their
log-softmax and its gradient move about 11 GB a step. Two savings, both exact:

1. only the scored real-token positions (labels != pad after :meth:`Mask.scored`) are projected: the others
   contribute nothing to the loss, so padding costs no V-wide product;
2. the N x V logits are made ``CHUNK_ROWS`` rows at a time, and each chunk's gradient with respect to its
   hidden states and to the output matrix is computed at once, in the forward (the loss is a scalar: its
   backward only scales them), so no chunk's logits are kept (Liger-Kernel's fused linear cross-entropy).

It applies to a generator that states its logits are one matrix product (``linear_head(x) -> (x', W)``,
logits = x' W^T: tied, two-way, untied and factorized embeddings); a head without it (adaptive softmax, mixture of
softmaxes) keeps the full logits. Under autocast the product runs in the autocast dtype and the softmax in fp32,
as ``F.linear`` then ``F.cross_entropy`` would. Validation keeps the full logits (its per-token loss and accuracy
stay exactly as they were).

The loss (torch's label smoothing, eps over all V classes, padding ignored), for N scored tokens:
    loss = 1/N sum_i [ (1 - eps) (lse_i - z_{i,y_i}) + eps (lse_i - mean_v z_{i,v}) ],  lse_i = logsumexp_v z_{i,v}
    d loss / d z_{i,v} = (softmax(z_i)_v - (1 - eps) [v = y_i] - eps / V) / N
The constant -eps/V of every class enters the gradients as a rank-one term (-eps/V times the column sums of W for
the hidden states, of the chunk's rows for W), so it costs no pass over the chunk's (C, V) probabilities.
"""

from __future__ import annotations

import torch

CHUNK_ROWS = 4096  # rows of logits made at once: 4096 x 37k fp32 is 0.6 GB


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype F.linear would run in here: the autocast dtype where autocast is on, else the input's."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return x.dtype


class LinearCrossEntropy(torch.autograd.Function):
    """Mean label-smoothed cross-entropy of logits x W^T against y, chunked over rows; gradients made in forward."""

    @staticmethod
    def forward(ctx, x, weight, targets, smoothing: float, chunk_rows: int):  # noqa: D102 (see the class)
        """x (N, d), weight (V, d), targets (N,) -> the mean loss (a scalar, fp32)."""
        dtype = _compute_dtype(x)
        n, V = x.size(0), weight.size(0)
        want_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        with torch.autocast(x.device.type, enabled=False):
            w = weight.to(dtype)  # (V, d)
            total = torch.zeros((), dtype=torch.float32, device=x.device)
            grad_x = torch.empty_like(x) if ctx.needs_input_grad[0] else None  # (N, d)
            grad_w = torch.zeros_like(weight, dtype=torch.float32) if ctx.needs_input_grad[1] else None  # (V, d)
            spread = (smoothing / V) * w.float().sum(0) if grad_x is not None else None  # (d,)
            for start in range(0, n, chunk_rows):
                xc, yc = x[start:start + chunk_rows].to(dtype), targets[start:start + chunk_rows]  # (C, d), (C,)
                log_p = torch.log_softmax((xc @ w.t()).float(), dim=-1)  # (C, V)
                picked = log_p.gather(1, yc[:, None]).squeeze(1)  # (C,)
                total -= ((1 - smoothing) * picked + smoothing * log_p.mean(-1)).sum()
                if not want_grad:
                    continue
                dz = log_p.exp_()  # (C, V): softmax, in log_p's storage
                dz.scatter_add_(1, yc[:, None], dz.new_full((yc.numel(), 1), -(1 - smoothing)))
                dz = dz.to(dtype)  # the 1/N of the mean is applied in backward, to the smaller (N, d) and (V, d)
                # the eps/V every class gets, taken out of dz: a rank-one term of the products (no pass over (C, V))
                if grad_x is not None:
                    grad_x[start:start + chunk_rows] = ((dz @ w).float() - spread).to(x.dtype)  # (C, d)
                if grad_w is not None:
                    grad_w += (dz.t() @ xc).float() - (smoothing / V) * xc.float().sum(0)  # (V, d)
        ctx.save_for_backward(grad_x if grad_x is not None else x.new_empty(0),
                              grad_w if grad_w is not None else x.new_empty(0))
        ctx.weight_dtype, ctx.n = weight.dtype, max(n, 1)
        return total / max(n, 1)

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        grad_x, grad_w = ctx.saved_tensors
        scale = grad_out / ctx.n  # d mean / d sum, times the incoming gradient
        gx = grad_x * scale.to(grad_x.dtype) if ctx.needs_input_grad[0] else None
        gw = (grad_w * scale).to(ctx.weight_dtype) if ctx.needs_input_grad[1] else None
        return gx, gw, None, None, None


def projected_loss(hidden: torch.Tensor, generator, labels: torch.Tensor, pad_id: int, smoothing: float,
                   chunk_rows: int = CHUNK_ROWS) -> torch.Tensor:
    """The mean label-smoothed cross-entropy over the real labels, projecting only their positions.

    Args:
        hidden: the decoder's output (B, T, d_model), before the generator.
        generator: a head with ``linear_head(x) -> (x', W)``: logits = x' W^T, x' (..., d'), W (V, d').
        labels: (B, T); ``pad_id`` marks positions not scored.
        smoothing: eps_ls, spread over all V classes as ``F.cross_entropy(label_smoothing=...)`` does.
        chunk_rows: rows of logits made at once.

    Returns:
        The scalar loss, equal to ``F.cross_entropy(generator(hidden).flatten(0, 1), labels.flatten(),
        ignore_index=pad_id, label_smoothing=smoothing)`` (NaN when no label is real, as that is).
    """
    keep = labels != pad_id  # (B, T)
    features, weight = generator.linear_head(hidden[keep])  # (N, d'), (V, d')
    if features.size(0) == 0:
        return features.sum() * float("nan")  # what F.cross_entropy gives with nothing to score
    return LinearCrossEntropy.apply(features, weight, labels[keep], float(smoothing), chunk_rows)


def supports_projected_loss(generator) -> bool:
    """Whether the head states its logits are one matrix product (it has ``linear_head``)."""
    return callable(getattr(generator, "linear_head", None))
