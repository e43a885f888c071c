"""Learning-rate schedules. Each returns a function from optimiser step (0-based) to the absolute lr.

``train.lr`` is the peak learning rate under every schedule, so a swept lr always changes the run. Left unset
(null, the default), each schedule says what it peaks at: ``noam`` the paper's formula, whose peak is
d_model^-0.5 * warmup^-0.5; ``cosine`` and ``constant`` :data:`DEFAULT_PEAK`. A schedule states the config
keys it reads by the context it takes, so a key no schedule reads is still refused as a no-op.
"""

from __future__ import annotations

import collections.abc
import math
from typing import Callable

from ablate.errors import ConfigError
from ablate.registry import declare_kind, register

Schedule = Callable[[int], float]

KIND = declare_kind("schedule", key="train.schedule", interface=collections.abc.Callable, default="noam",
                    description="learning-rate schedule: the absolute lr at each optimiser step")


DEFAULT_PEAK = 1e-3  # the peak of cosine and constant when train.lr is unset


def _check_warmup(warmup: int) -> None:
    if warmup < 0:
        raise ConfigError("train.schedule_args.warmup", warmup, "a non-negative integer")


@register("schedule", "noam")
def noam(*, d_model: int, lr: float | None = None, warmup: int = 4000, scale: float = 1.0) -> Schedule:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Vaswani et al. 2017, section 5.3;
    the paper's); with train.lr, the same shape peaking at train.lr at step = warmup (fairseq's inverse_sqrt)."""
    _check_warmup(warmup)
    if warmup == 0:
        raise ConfigError("train.schedule_args.warmup", warmup, "a positive integer for schedule=noam")
    factor = d_model**-0.5 if lr is None else lr * warmup**0.5  # d_model^-0.5 is the paper's: its peak is implicit

    def schedule(step: int) -> float:
        s = step + 1  # the paper counts steps from 1
        return scale * factor * min(s**-0.5, s * warmup**-1.5)

    return schedule


@register("schedule", "cosine")
def cosine(*, lr: float | None, max_steps: int, warmup: int = 4000, min_ratio: float = 0.1) -> Schedule:
    """Linear warmup to train.lr (unset: 1e-3), then cosine decay to min_ratio * train.lr at max_steps
    (Loshchilov & Hutter 2017)."""
    _check_warmup(warmup)
    peak = DEFAULT_PEAK if lr is None else lr

    def schedule(step: int) -> float:
        if step < warmup:
            return peak * (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
        return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))

    return schedule


@register("schedule", "constant")
def constant(*, lr: float | None, warmup: int = 0) -> Schedule:
    """train.lr (unset: 1e-3) after an optional linear warmup (warmup=0: no warmup, as in Xiong et al. 2020's
    ablation)."""
    _check_warmup(warmup)
    peak = DEFAULT_PEAK if lr is None else lr
    return lambda step: peak * min(1.0, (step + 1) / warmup) if warmup else peak
