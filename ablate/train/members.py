"""What each member of a seed array keeps, so that its run directory is an ordinary run's: its loggers (CSV, and its
own W&B run), ``progress.json``, ``best.ckpt`` and ``last.ckpt`` (weights, which ``ablate evaluate`` reads as a solo
run's), its last ``train.keep_checkpoints`` step checkpoints (``step-<step>.ckpt``, at the steps a solo run keeps:
:mod:`ablate.train.checkpoints`), its STOP requests, and its ``result.json``, which says it was fused (``fused:
{members, index, array}``).

A member fails alone: a training loss that went NaN or infinite (read from the device every ``log_every`` steps, at
each validation and at the end) or a validation loss that did, and its result says the step; the array trains on
with the others, and stops once none is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig

from ablate.runs.files import best_checkpoint, last_checkpoint, read_result
from ablate.runs.metrics import CURVES, LR, TOKENS_PER_S, TRAIN_LOSS, VAL_LOSS
from ablate.runs.status import Status
from ablate.train.checkpoints import drop_step_checkpoints_after, keep_step_weights, save_weights
from ablate.train.fused_system import RUNNING, FusedSystem
from ablate.train.life import ProgressFile, StopFile, TrainClock, failure, not_finite, tokens_per_s


@dataclass
class Member:
    """One member's run: its directory, config, loggers and what it has become."""

    index: int
    run_dir: Path
    cfg: DictConfig
    loggers: list[Any]
    status: Status = Status.RUNNING  # then finished, failed or stopped
    error: str | None = None
    stopped_because: str | None = None
    step: int = 0
    best: float = math.inf
    final: dict[str, float] = field(default_factory=dict)
    tokens: int = 0
    ended_before: bool = False  # it ended in an earlier attempt of its array: its record is not this attempt's
    progress: ProgressFile = field(init=False)
    stop: StopFile = field(init=False)

    def __post_init__(self) -> None:
        self.progress, self.stop = ProgressFile(self.run_dir), StopFile(self.run_dir)


class Members(pl.Callback):
    """The members' runs beside the array's training (see the module docstring).

    Args:
        members: the array's members, in the order of its member axis.
        every: ``train.log_every``.
        record: writes a member's ``result.json``.
        keep: ``train.keep_checkpoints`` (0: no step checkpoints), one every ``checkpoint_every`` steps.
    """

    def __init__(self, members: list[Member], every: int, record: Callable[[Member], None], *, keep: int = 0,
                 checkpoint_every: int = 0):
        self.members, self.every, self.record = members, every, record
        self.keep, self.checkpoint_every = keep, checkpoint_every
        self._kept_at = 0  # the step of the last step checkpoints (Lightning's: none at step 0, each step's once)
        self._tokens: torch.Tensor | None = None  # (K,) target tokens since the last log, on the device
        self.clock = TrainClock()  # the array's training seconds, validation excluded: every member's

    def state_dict(self) -> dict[str, Any]:
        # final: an array resumed from the checkpoint of its last step trains and validates nothing more, and still
        # records each member's final values
        return {"tokens": [m.tokens for m in self.members], "best": [m.best for m in self.members],
                "final": [m.final for m in self.members], "train_seconds": self.clock.train_seconds}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for m, tokens, best in zip(self.members, state_dict["tokens"], state_dict["best"]):
            m.tokens, m.best = tokens, best
        for m, final in zip(self.members, state_dict.get("final", [])):
            m.final = dict(final)
        self.clock.train_seconds = state_dict["train_seconds"]

    @property
    def train_seconds(self) -> float:
        return self.clock.train_seconds

    @property
    def running(self) -> list[Member]:
        return [m for m in self.members if m.status == Status.RUNNING]

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for m in self.members:  # an earlier attempt's history, up to where this one resumes
            m.progress.resume(trainer.global_step)
        for m in self.members:
            if m.ended_before:  # ended after the checkpoint this attempt resumed from: it trains no further
                pl_module.out[m.index] = True
            else:  # step checkpoints written after the one this attempt resumes from (from step 0: any) go
                drop_step_checkpoints_after(m.run_dir, trainer.global_step)
        for m, out in zip(self.members, pl_module.out.tolist()):
            if out and m.status == Status.RUNNING:  # out before the checkpoint this attempt resumed from
                self._fail(m, pl_module, trainer.global_step, None)
        self.clock.resume()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: FusedSystem, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        tokens = (batch["labels"] != pl_module.pad_id).flatten(1).sum(1)  # (K,)
        self._tokens = tokens if self._tokens is None else self._tokens + tokens
        step = trainer.global_step
        if self.keep and step % self.checkpoint_every == 0 and step != self._kept_at:
            self._kept_at = step  # before a STOP read now: a solo run stopped at this step keeps it too
            self._check(trainer, pl_module)  # a member whose loss went bad is failed, not kept
            for m in self.running:
                keep_step_weights(m.run_dir, pl_module.model.member_state_dict(m.index), m.cfg, step, self.keep)
        for m in self.running:
            if (reason := m.stop.requested()) is not None:
                m.stopped_because = reason
                self._out(m, pl_module, Status.STOPPED, trainer.global_step)
        if trainer.global_step % self.every == 0:
            self._log_train(trainer, pl_module)
        if not self.running:
            trainer.should_stop = True

    def _log_train(self, trainer: pl.Trainer, pl_module: FusedSystem) -> None:
        seconds = self.clock.lap()
        tokens = self._tokens.tolist() if self._tokens is not None else [0] * len(self.members)
        self._tokens = None
        losses = (pl_module.train_sum / pl_module.train_steps.clamp(min=1)).tolist()  # (K,) the window's mean
        pl_module.train_sum.zero_()
        pl_module.train_steps.zero_()
        self._check(trainer, pl_module)
        lr = trainer.optimizers[0].param_groups[0]["lr"]
        aux = {name: value.tolist() for name, value in pl_module.aux_last.items()}
        for m, n, loss in zip(self.members, tokens, losses):
            m.tokens += n
            if m.status != Status.RUNNING:
                continue
            metrics = {TRAIN_LOSS: loss, LR: lr, **{f"train/aux/{k}": v[m.index] for k, v in aux.items()}}
            if seconds > 0:
                metrics[TOKENS_PER_S] = tokens_per_s(n, seconds)
            m.final.update({k: v for k, v in metrics.items() if k not in CURVES})
            for logger in m.loggers:  # at Lightning's step, as a solo run's: the 0-based index of the last step
                logger.log_metrics(metrics, step=trainer.global_step - 1)

    def _check(self, trainer: pl.Trainer, pl_module: FusedSystem) -> None:
        """Fail the members whose training loss went bad since the last read."""
        for m, step in zip(self.members, pl_module.first_bad.tolist()):
            if step != RUNNING and m.status == Status.RUNNING:
                self._fail(m, pl_module, step, failure(not_finite(TRAIN_LOSS, step)))

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._check(trainer, pl_module)
            self.clock.pause()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: FusedSystem) -> None:
        if trainer.sanity_checking:
            return
        self.clock.resume()
        step = trainer.global_step
        values = {k: v.tolist() for k, v in pl_module.val_metrics.items()}
        for m in self.running:
            mine = {k: v[m.index] for k, v in values.items()}
            if not math.isfinite(mine[VAL_LOSS]):
                self._fail(m, pl_module, step, failure(not_finite(VAL_LOSS, step, mine[VAL_LOSS])))
                continue
            m.final, m.step = {**m.final, **mine}, step
            for logger in m.loggers:
                logger.log_metrics(mine, step=step - 1)  # Lightning's step, as above
                logger.save()  # the rows so far on disk with the checkpoint this validation writes: a kill keeps them
            m.progress.record(step, mine)
            weights = pl_module.model.member_state_dict(m.index)
            save_weights(last_checkpoint(m.run_dir), weights, m.cfg, step)
            if mine[VAL_LOSS] < m.best:
                m.best = mine[VAL_LOSS]
                save_weights(best_checkpoint(m.run_dir), weights, m.cfg, step)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._tokens is not None:  # steps since the last log (none when max_steps is a multiple of log_every)
            self._log_train(trainer, pl_module)

    def _fail(self, m: Member, pl_module: FusedSystem, step: int, error: str | None) -> None:
        m.error = error or (read_result(m.run_dir) or {}).get("error") or "failed in an earlier attempt"
        self._out(m, pl_module, Status.FAILED, step)

    def _out(self, m: Member, pl_module: FusedSystem, status: str, step: int) -> None:
        pl_module.out[m.index] = True
        m.status, m.step = status, step
        self.record(m)  # now: a report read while the others train sees it
