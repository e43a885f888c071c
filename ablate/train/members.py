"""What each member of a seed array keeps, so that its run directory is an ordinary run's: its loggers (CSV, and its
own W&B run), ``progress.json``, ``best.ckpt`` and ``last.ckpt`` (weights, which ``ablate evaluate`` reads as a solo
run's), its last ``train.keep_checkpoints`` step checkpoints (``step-<step>.ckpt``, at the steps a solo run keeps:
:mod:`ablate.train.checkpoints`), its STOP requests, and its ``result.json``, which says it was fused (``fused:
{members, index, array}``).

A member fails alone: a training loss that went NaN or infinite (read from the device every ``log_every`` steps, at
each validation and at the end) or a validation loss that did, and its result says the step, the error and a
traceback as a solo run's; the array trains on with the others, and stops once none is left. A member stopped by a
request is validated at the step it stopped at, as a solo run is (the array validates then: the others record
nothing of it). A signal that stops the array (:class:`ablate.train.callbacks.SignalStop`) leaves each member still
training interrupted at that step, its ``last.ckpt`` that step's weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig

from ablate.runs.files import last_checkpoint, read_result
from ablate.runs.metrics import CURVES, EPOCH, LR, TOKENS_PER_S, TRAIN_LOSS, VAL_LOSS
from ablate.runs.status import Status
from ablate.train.checkpoints import drop_step_checkpoints_after, keep_step_weights, save_weights
from ablate.train.fused_system import RUNNING, FusedSystem
from ablate.train.life import BestWeights, ProgressFile, StopFile, TrainClock, failure, not_finite, tokens_per_s, trace
from ablate.train.signals import Interrupted


@dataclass
class Member:
    """One member's run: its directory, config, loggers and what it has become."""

    index: int
    run_dir: Path
    cfg: DictConfig
    loggers: list[Any]
    status: Status = Status.RUNNING  # then finished, failed or stopped
    error: str | None = None
    traceback: str | None = None  # of the error that failed it alone
    stopped_because: str | None = None
    interrupted_by: str | None = None  # SIGINT, SIGTERM
    step: int = 0
    final: dict[str, float] = field(default_factory=dict)
    tokens: int = 0
    ended_before: bool = False  # it ended in an earlier attempt of its array: its record is not this attempt's
    progress: ProgressFile = field(init=False)
    stop: StopFile = field(init=False)
    best: BestWeights = field(init=False)  # its lowest val/loss so far and best.ckpt

    def __post_init__(self) -> None:
        self.progress, self.stop = ProgressFile(self.run_dir), StopFile(self.run_dir)
        self.best = BestWeights(self.run_dir)


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
        self._counting: torch.Tensor | None = None  # (K,) 1 for the members still training, on the device
        self._stopping: list[Member] = []  # stopped by a request at this step: validated at it
        self._on_schedule = False  # whether this step validates anyway
        self._lr = 0.0  # the learning rate this step trains with (the scheduler steps after it)
        self.clock = TrainClock()  # the array's training seconds, validation excluded: every member's

    def state_dict(self) -> dict[str, Any]:
        # final: an array resumed from the checkpoint of its last step trains and validates nothing more, and still
        # records each member's final values
        # with the window not yet logged: a checkpoint saved between two logs (a stop on a signal) counts its tokens
        window = self._tokens.tolist() if self._tokens is not None else [0] * len(self.members)
        return {"tokens": [m.tokens + n for m, n in zip(self.members, window)],
                "best": [m.best.value for m in self.members], "final": [m.final for m in self.members],
                "train_seconds": self.clock.train_seconds + self.clock.running()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for m, tokens, best in zip(self.members, state_dict["tokens"], state_dict["best"]):
            m.tokens, m.best.value = tokens, best
        for m, final in zip(self.members, state_dict.get("final", [])):
            m.final = dict(final)
        self.clock.train_seconds = state_dict["train_seconds"]
        self._tokens = None

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

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: FusedSystem, batch: Any, batch_idx: int) -> None:
        # what a solo run logs as train/lr (Lightning's LearningRateMonitor reads it here): the rate of this step
        self._lr = trainer.optimizers[0].param_groups[0]["lr"]

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: FusedSystem, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self._counting is None:
            self._counting = torch.tensor([m.status == Status.RUNNING for m in self.members], device=pl_module.device)
        # (K,) a member's tokens count up to the step it ended at, as a solo run's
        tokens = (batch["labels"] != pl_module.pad_id).flatten(1).sum(1) * self._counting
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
                self._stopping.append(m)
        if trainer.global_step % self.every == 0:
            self._log_train(trainer, pl_module)
        if self._stopping:  # Lightning validates before a stop: these members are, the array then trains on
            self._on_schedule = _validates_on_schedule(trainer)
            trainer.should_stop = True
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
        lr = self._lr  # read as this step started: a log follows a trained batch (its tokens are counted)
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
                logger.log_metrics({**metrics, EPOCH: trainer.current_epoch}, step=trainer.global_step - 1)

    def _check(self, trainer: pl.Trainer, pl_module: FusedSystem) -> None:
        """Fail the members whose training loss went bad since the last read."""
        bad: list[float] | None = None  # what each loss turned to: read from the device once one did
        for m, step in zip(self.members, pl_module.first_bad.tolist()):
            if step != RUNNING and m.status == Status.RUNNING:  # at the step it is read at, as a solo run's
                bad = pl_module.bad_loss.tolist() if bad is None else bad
                self._fail(m, pl_module, trainer.global_step, not_finite(TRAIN_LOSS, step, bad[m.index]))

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
        due = self.running if not self._stopping or self._on_schedule else []
        stopping, self._stopping = self._stopping, []
        if stopping and self.running and not 0 < trainer.max_steps <= step:
            trainer.should_stop = False  # asked for this validation alone: the others train on
        for m in [*due, *stopping]:
            mine = {k: v[m.index] for k, v in values.items()}
            if not math.isfinite(mine[VAL_LOSS]):
                # a stopping member whose validation went bad fails, as a solo run does
                m.status, m.stopped_because = Status.RUNNING, None
                self._fail(m, pl_module, step, not_finite(VAL_LOSS, step, mine[VAL_LOSS]))
                continue
            m.final, m.step = {**m.final, **mine}, step
            for logger in m.loggers:
                logger.log_metrics({**mine, EPOCH: trainer.current_epoch}, step=step - 1)  # Lightning's step, as above
                logger.save()  # the rows so far on disk with the checkpoint this validation writes: a kill keeps them
            m.progress.record(step, mine)
            weights = pl_module.model.member_state_dict(m.index)
            save_weights(last_checkpoint(m.run_dir), weights, m.cfg, step)
            m.best.offer(mine[VAL_LOSS], weights, m.cfg, step)
        for m in stopping:
            if m.status == Status.STOPPED:
                self.record(m)  # with its validation

    def on_exception(self, trainer: pl.Trainer, pl_module: FusedSystem, exception: BaseException) -> None:
        """A signal stopped the array at the end of a step (its checkpoint saved): the members still training are
        interrupted there, each with that step's weights as its ``last.ckpt``, as a solo run's."""
        if not isinstance(exception, Interrupted):
            return
        for m in self.running:
            m.status, m.error, m.interrupted_by = Status.INTERRUPTED, exception.error, exception.name
            if exception.step is not None:  # training had started: it stands at the step the array saved
                m.step = exception.step
                save_weights(last_checkpoint(m.run_dir), pl_module.model.member_state_dict(m.index), m.cfg, m.step)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._tokens is not None:  # steps since the last log (none when max_steps is a multiple of log_every)
            self._log_train(trainer, pl_module)

    def _fail(self, m: Member, pl_module: FusedSystem, step: int, error: Exception | None) -> None:
        """Fail ``m`` at ``step`` with ``error`` (None: it failed in the attempt before, which recorded why)."""
        if error is not None:
            m.error, m.traceback = failure(error), trace(error)
        else:
            m.error = (read_result(m.run_dir) or {}).get("error") or "failed in an earlier attempt"
        self._out(m, pl_module, Status.FAILED, step)

    def _out(self, m: Member, pl_module: FusedSystem, status: str, step: int) -> None:
        pl_module.out[m.index] = True
        m.status, m.step = status, step
        self._counting = None  # its tokens count no more
        self.record(m)  # now: a report read while the others train sees it


def _validates_on_schedule(trainer: pl.Trainer) -> bool:
    """Whether Lightning validates after this batch anyway (every ``val_check_batch`` batches, and at the last step),
    by the rule of its training loop (``_TrainingEpochLoop._should_check_val_fx``)."""
    batches = trainer.fit_loop.epoch_loop.total_batch_idx + 1
    every = trainer.val_check_batch
    return (every is not None and every != float("inf") and batches % every == 0) or 0 < trainer.max_steps <= \
        trainer.global_step
