"""The paper's optimiser (section 5.3): Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9.

Fused (one kernel over all parameters) wherever PyTorch has a fused Adam for the parameters'
device: on this kind of CPU a fused step of a 60M-parameter model took 41 ms against 265 ms for
the default ``foreach`` implementation (``benchmarks/train_step.py`` shows the effect on a step).
The update is the same Adam; only the kernel differs. Not fused where Lightning forbids it: a fused
optimizer unscales gradients itself, so under mixed precision Lightning refuses to clip its gradients.
"""

from __future__ import annotations

from typing import Iterable

import torch
from omegaconf import DictConfig

FUSED_DEVICES = ("cpu", "cuda")


def adam(parameters: Iterable[torch.nn.Parameter], train: DictConfig, lr: float = 1.0, *,
         mixed_precision: bool = False) -> torch.optim.Adam:
    """Adam with ``train.betas``, ``train.eps``, ``train.weight_decay``; ``lr`` 1.0 lets a schedule set the
    absolute rate.

    ``mixed_precision``: the run trains in a mixed precision (then a run that clips gradients gets the
    unfused Adam).
    """
    params = [p for p in parameters if p.requires_grad]
    clips_under_amp = mixed_precision and train.grad_clip is not None
    fused = bool(params) and not clips_under_amp and all(
        p.device.type in FUSED_DEVICES and p.is_floating_point() for p in params)
    return torch.optim.Adam(params, lr=lr, betas=tuple(train.betas), eps=train.eps,
                            weight_decay=train.weight_decay, fused=fused or None)
