"""Callbacks of a training run: token throughput, failing fast on a non-finite loss, progress for a sweep's
pool, a graceful stop on request, a stop on SIGINT or SIGTERM with a checkpoint of the step it stops at, the final
values in every checkpoint, the best validation and its best.ckpt, and a validation at the last step."""

from __future__ import annotations

import math
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

from ablate.runs.metrics import CURVES, TOKENS_PER_S, TRAIN_LOSS, VAL_LOSS
from ablate.train.life import BestWeights, ProgressFile, StopFile, TrainClock, not_finite, tokens_per_s
from ablate.train.signals import STOP_SIGNALS, Interrupted


class TokenThroughput(pl.Callback):
    """Logs ``train/tokens_per_s`` (real target tokens, validation time excluded) every ``every`` steps.

    Under DDP, the count is this process's tokens times the world size (ranks get equal shares).

    Token counts stay on the device between logs, so the step loop never waits
    for the GPU except when it logs. The totals travel in checkpoints, so a resumed run reports
    the tokens and seconds of all its attempts.
    """

    def __init__(self, pad_id: int, every: int):
        self.pad_id, self.every = pad_id, every
        self.total_tokens = 0
        self.clock = TrainClock()
        self._window: torch.Tensor | int = 0

    def state_dict(self) -> dict[str, Any]:
        # with the window not yet logged: a checkpoint saved between two logs (a stop on a signal) counts its tokens
        return {"total_tokens": self.total_tokens + int(self._window),
                "train_seconds": self.clock.train_seconds + self.clock.running()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.total_tokens, self.clock.train_seconds = state_dict["total_tokens"], state_dict["train_seconds"]
        self._window = 0

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.clock.resume()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._window = self._window + (batch["labels"] != self.pad_id).sum() * trainer.world_size
        if trainer.global_step % self.every == 0:
            self._flush(pl_module, log=True)

    def _flush(self, pl_module: pl.LightningModule, log: bool) -> None:
        tokens, seconds = int(self._window), self.clock.lap()
        self.total_tokens += tokens
        self._window = 0
        if log and seconds > 0:
            pl_module.log(TOKENS_PER_S, tokens_per_s(tokens, seconds))

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._flush(pl_module, log=False)
        self.clock.pause()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.clock.resume()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._flush(pl_module, log=False)

    @property
    def train_seconds(self) -> float:
        return self.clock.train_seconds

    @property
    def tokens_per_s(self) -> float:
        return tokens_per_s(self.total_tokens, self.clock.train_seconds)


class WallClock(pl.Callback):
    """The run's wall time over every attempt: each checkpoint carries the seconds spent up to it, so a resumed run
    counts the attempts before (up to their last checkpoint) and its own."""

    def __init__(self, start: float):
        self.start, self.before = start, 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.before = float(state_dict.get("seconds", 0.0))

    @property
    def seconds(self) -> float:
        return self.before + time.time() - self.start


class FiniteLoss(pl.Callback):
    """Fails the run when its training loss turns NaN or infinite at any step, or its validation loss does.

    Every step folds the loss's finiteness into a step number kept on the loss's device (the first step whose loss
    was not finite), so the loop never waits for a GPU; that number is read every ``every`` steps, before each
    validation (no checkpoint is saved from weights that went bad) and when training ends, so a run shorter than
    ``every`` steps, or one that goes bad between two reads, fails too, naming the step.
    """

    def __init__(self, every: int):
        self.every = every
        self._first_bad: torch.Tensor | None = None  # the first step with a non-finite loss; -1: none yet
        self._bad_loss: torch.Tensor | None = None  # its loss

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if outputs is None:
            return
        loss = outputs["loss"].detach()
        if self._first_bad is None:
            self._first_bad = torch.full((), -1, dtype=torch.long, device=loss.device)
            self._bad_loss = torch.zeros((), dtype=loss.dtype, device=loss.device)
        bad = ~torch.isfinite(loss) & (self._first_bad < 0)
        self._first_bad = torch.where(bad, trainer.global_step, self._first_bad)
        self._bad_loss = torch.where(bad, loss, self._bad_loss)
        if trainer.global_step % self.every == 0:
            self._check()

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get(VAL_LOSS)
        if not trainer.sanity_checking and value is not None and not math.isfinite(float(value)):
            raise not_finite(VAL_LOSS, trainer.global_step, float(value))

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check()

    def _check(self) -> None:
        if self._first_bad is not None and (step := int(self._first_bad)) >= 0:
            raise not_finite(TRAIN_LOSS, step, float(self._bad_loss))


class Progress(pl.Callback):
    """Writes ``<run_dir>/progress.json`` after every validation: each validation metric's values so far, by step.

    A sweep's pool reads it while the run trains (hyperband stops runs by it); a resumed run keeps the values
    of the steps it does not repeat.
    """

    def __init__(self, run_dir: Path):
        self.file = ProgressFile(run_dir)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.file.resume(trainer.global_step)  # an earlier attempt: keep what it logged up to where this one resumes

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        self.file.record(trainer.global_step, {k: float(v) for k, v in trainer.callback_metrics.items()
                                               if k.startswith("val/") and v.numel() == 1})


class Best(pl.Callback):
    """Keeps the run's best validation and its ``best.ckpt`` (:class:`ablate.train.life.BestWeights`, as a seed
    array's member keeps its own) at every validation; ``value``: the lowest val/loss so far (infinite: none)."""

    def __init__(self, run_dir: Path, cfg: Any):
        self.weights, self.cfg = BestWeights(run_dir), cfg

    @property
    def value(self) -> float:
        return self.weights.value

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.weights.value}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.weights.value = float(state_dict["value"])

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        # a checkpoint of an earlier ablate, whose best was Lightning's ModelCheckpoint on val/loss (the state
        # load_state_dict is given, when there is one, comes after this)
        for key, state in checkpoint.get("callbacks", {}).items():
            if key.startswith("ModelCheckpoint") and f"'monitor': '{VAL_LOSS}'" in key:
                if (score := state.get("best_model_score")) is not None:
                    self.weights.value = float(score)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get(VAL_LOSS)
        if trainer.sanity_checking or value is None:
            return
        # every rank keeps the value (its checkpoint state); the first writes the file
        weights = pl_module.model.state_dict() if trainer.is_global_zero else None
        self.weights.offer(float(value), weights, self.cfg, trainer.global_step)


class StopRequest(pl.Callback):
    """Ends training gracefully when ``<run_dir>/STOP`` appears (a sweep's early termination); ``reason`` is
    its text."""

    def __init__(self, run_dir: Path):
        self.file = StopFile(run_dir)
        self.reason: str | None = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.reason is None and (reason := self.file.requested()) is not None:
            self.reason = reason
            trainer.should_stop = True


class SignalStop(pl.Callback):
    """SIGINT and SIGTERM end training at the end of the step they arrive in, with that step's checkpoint.

    While training runs, a signal is noted and training goes on to the end of its step (a validation due then
    included); the checkpoint of that step is written to ``checkpoint`` (the run's ``last.ckpt``), the step's logs are
    written, and :class:`Interrupted` is raised as the next step begins: a rerun resumes exactly where it stopped (the
    checkpoint holds what :class:`ablate.train.resume.ExactResume` keeps). Before training starts there is nothing to
    save, and the signal stops it at once; after training ends it is noted and the run's result is still written.
    A second Ctrl-C stops at once, keeping the checkpoint before.

    Lightning's own SIGTERM handling is replaced while training runs: it raises a bare ``SystemExit`` (exit code 0) at
    the end of a step, or in the middle of a validation, without saving. Under DDP (several processes) it is kept: a
    checkpoint is written by every process together, which a signal to one cannot ask for.

    ``install`` it before the run starts and ``uninstall`` it once its result is written (from the main thread: Python
    runs signal handlers there; from another, it does nothing); set ``checkpoint`` once the run's folder is known.
    ``started``: training has started (the first step is under way, or done).
    """

    def __init__(self, checkpoint: Path | None = None):
        self.checkpoint = checkpoint
        self.signum: int | None = None  # the first signal received
        self.started = False  # from the first step on: a signal stops at the end of a step
        self.saved_at: int | None = None  # the step of the checkpoint a stop leaves (the one resumed from, or saved)
        self._before: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._before = {s: signal.signal(s, self._received) for s in STOP_SIGNALS}

    def uninstall(self) -> None:
        for s, handler in self._before.items():
            signal.signal(s, handler)
        self._before = {}

    def _received(self, signum: int, frame: Any) -> None:
        again = self.signum is not None
        self.signum = self.signum if again else signum
        if not self.started or (again and signum == signal.SIGINT):  # nothing to save yet, or Ctrl-C twice: now
            raise Interrupted(self.signum)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.saved_at, self.started = trainer.global_step, True  # the checkpoint resumed from is where it stands
        if trainer.world_size == 1 and self._before:  # Lightning put its own SIGTERM handler in place as fit began
            for s in STOP_SIGNALS:
                signal.signal(s, self._received)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if self.signum is not None and self.saved_at == trainer.global_step:
            raise Interrupted(self.signum, trainer.global_step)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        # After the other callbacks' (the callback list puts this one last): the checkpoint holds the random states
        # and data position of the step just trained. A signal that arrives between two steps is handled at the end
        # of the next one.
        if self.signum is not None and trainer.world_size == 1 and self.checkpoint is not None:
            trainer.save_checkpoint(self.checkpoint)
            self.saved_at = trainer.global_step


def scalar_metrics(trainer: pl.Trainer) -> dict[str, float]:
    """The trainer's latest value of every scalar metric (what a run records as ``final``)."""
    return {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1 and k not in CURVES}


class FinalValues(pl.Callback):
    """Every checkpoint carries the latest value of every metric (``final_values``), so that a run resumed from the
    checkpoint of its last step (killed between that checkpoint and its ``result.json``, or whose ``result.json`` was
    removed), which trains and validates nothing more, still records the final values of the run it continues.

    :meth:`final` is the checkpoint's values updated with those this attempt logged; ``restored`` is None until a
    checkpoint is read.
    """

    KEY = "final_values"

    def __init__(self) -> None:
        self.restored: dict[str, float] | None = None

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        checkpoint[self.KEY] = self.final(trainer)

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        self.restored = dict(checkpoint.get(self.KEY, {}))

    def final(self, trainer: pl.Trainer) -> dict[str, float]:
        return {**(self.restored or {}), **scalar_metrics(trainer)}


class ValidateAtLastStep(pl.Callback):
    """Validates at the last step whatever ``train.val_every``, so every finished run has its val metrics and its
    ``best.ckpt``: Lightning validates every ``val_every`` steps only, and a run of fewer steps (or of a count that is
    not a multiple) ended without scoring its last weights.

    It asks Lightning to stop at ``max_steps`` (where it stops anyway), which runs Lightning's own validation before an
    early stop, once (a step that validates on schedule is not validated twice). Validation draws nothing from the
    training random streams (:class:`ablate.train.resume.ExactResume`), so the run trains as it did before.
    """

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True
