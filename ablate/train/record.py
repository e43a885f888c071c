"""A run's ``result.json``, built in one place from its config, its trainer and its outcome: a solo run's
(:mod:`ablate.train.run`) and each seed-array member's (:mod:`ablate.train.array`) alike, so that what they record
(precision, device, threads, attention kernel, the resume) is decided once.

    status, config_hash, run_dir          what the run is and where
    allocator, precision, device,         how this attempt trains (the trainer's device; the precision the config
    visible_devices, threads,             resolves to at its model's width: ablate.train.precision.run_precision)
    attention_kernel
    parameters, parameters_by_part        the model's size (one member's, for an array)
    started_at, resumed_from,             this attempt: when it started, the checkpoint it resumed from (null: its
    resumed_exactly                       first step), whether that resume was exact (only when it resumed)
    step, final, best, train_tokens,      the outcome, once there is one (not while it is running): the step it ended
    tokens_per_s, wall_time_s             at, the latest and the lowest values, tokens, time over every attempt
    error, traceback, stopped_because,    why it failed, was interrupted or was stopped, when it did
    interrupted_by
    fused                                 an array member's: {members, index, array}
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig

from ablate.runs.files import config_hash
from ablate.runs.metrics import VAL_LOSS, VAL_PPL, perplexity
from ablate.runs.status import Status
from ablate.runtime import allocator_in_use
from ablate.train.precision import run_precision


@dataclass(frozen=True)
class Attempt:
    """What one attempt at a run (a process training it, from its first step or a checkpoint) starts with."""

    started_at: float
    parameters: dict[str, int]  # count_parameters of one model: total and by part
    resumed_from: Path | None = None
    attention_kernel: str = "sdpa"  # the kernel it trains with (ablate.train.kernels.choose_attention_kernel)


@dataclass
class Outcome:
    """How an attempt ended (or stands, for a member recorded while the others train)."""

    status: Status
    step: int | None  # None: it ended before training started (a Trainer that could not be made)
    final: dict[str, float] = field(default_factory=dict)
    best: float = math.nan  # the lowest val/loss; not finite: none yet
    train_tokens: int = 0
    tokens_per_s: float = 0.0
    wall_time_s: float | None = None
    resumed_exactly: bool = True  # when it resumed: whether the data position and random states were restored
    error: str | None = None
    traceback: str | None = None
    stopped_because: str | None = None
    interrupted_by: str | None = None  # SIGINT, SIGTERM


def device_name(trainer: pl.Trainer) -> str:
    """Where a run trains: ``cpu``, or ``cuda:<i> (<name>)`` (the index within its CUDA_VISIBLE_DEVICES)."""
    device = trainer.strategy.root_device
    return f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)


def run_result(cfg: DictConfig, run_dir: Path, trainer: pl.Trainer | None, attempt: Attempt,
               outcome: Outcome | None = None, *, fused: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``result.json`` of the run of ``cfg`` in ``run_dir``.

    Args:
        trainer: the Trainer it trains with; None before it is made (its device is then not recorded yet).
        attempt: what this attempt started with.
        outcome: how it ended; None: it is running.
        fused: a seed-array member's ``{members, index, array}``.
    """
    result: dict[str, Any] = {
        "status": outcome.status if outcome else Status.RUNNING, "config_hash": config_hash(cfg),
        "run_dir": str(run_dir), "allocator": allocator_in_use(), "precision": run_precision(cfg),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "threads": torch.get_num_threads(),
        "attention_kernel": attempt.attention_kernel, "parameters": attempt.parameters["total"],
        "parameters_by_part": dict(attempt.parameters), "started_at": attempt.started_at,
        "resumed_from": str(attempt.resumed_from) if attempt.resumed_from else None,
    }
    if trainer is not None:
        result["device"] = device_name(trainer)
    if fused is not None:
        result["fused"] = dict(fused)
    if outcome is None:
        return result
    if outcome.step is not None:
        best = outcome.best
        result.update(step=outcome.step, final=dict(outcome.final),
                      best={VAL_LOSS: best, VAL_PPL: perplexity(best)} if math.isfinite(best) else {},
                      train_tokens=outcome.train_tokens, tokens_per_s=outcome.tokens_per_s)
    if outcome.wall_time_s is not None:
        result["wall_time_s"] = outcome.wall_time_s  # every attempt's (from the checkpoint it resumed), not this one's
    if attempt.resumed_from is not None and outcome.step is not None:
        result["resumed_exactly"] = outcome.resumed_exactly
    for key in ("error", "traceback", "stopped_because", "interrupted_by"):
        if getattr(outcome, key) is not None:
            result[key] = getattr(outcome, key)
    return result
