"""What a training run prints: a log a person can read, whether it goes to a terminal or to a file.

On a terminal, Lightning's bar (:class:`LoggedLossBar`). Off one (a sweep run's ``train.log``,
``ablate train > log``), tqdm's bar would write every redraw after a carriage return and the validation bar would move
at every batch, so :class:`ProgressLines` writes a line per update instead: where training starts, the first step, each
step the loss is logged at, each validation's scores. Lightning's adverts for its cloud services (its "💡 Tip:" lines)
are dropped (:func:`drop_adverts`). Its model summary table is replaced by :func:`summary_line`: the table's FLOPs
column needs an example input and a forward pass at start, and counts that example batch's FLOPs, another figure than
the per-token count the sweep plans and matches budgets by (:mod:`ablate.model.flops`); without one it reads "0 Total
Flops". The line gives the parameters and that count.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from typing import Any

import pytorch_lightning as pl
from omegaconf import DictConfig
from pytorch_lightning.callbacks import ProgressBar, TQDMProgressBar
from pytorch_lightning.utilities.model_summary import get_human_readable_count
from torch import nn

from ablate.model.flops import count_flops, sequence_length
from ablate.runs.metrics import TRAIN_LOSS

ADVERT = "💡 Tip:"  # how Lightning's adverts begin
LIGHTNING_LOGGERS = ("pytorch_lightning.utilities.rank_zero", "lightning_fabric.utilities.rank_zero")


def _advert(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(ADVERT)


def drop_adverts() -> None:
    """Keep Lightning's adverts (litlogger, litmodels) out of every run's output, and its advice to start a run with
    ``srun``, given wherever Slurm is installed: a Slurm sweep's launcher builds Trainers on the login node (its
    preflight), and its jobs start each run in a process of their own, one task each; its other messages stay."""
    warnings.filterwarnings("ignore", message=r"The `srun` command is available on your system but is not used")
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if _advert not in logger.filters:
            logger.addFilter(_advert)


def summary_line(model: nn.Module, cfg: DictConfig, parameters: int) -> str:
    """``ablate: model EncoderDecoder: 22.1 K parameters, 1.2 M training FLOPs per target token (T = 12)``: the FLOPs
    of a forward and backward pass, by :func:`ablate.model.flops.count_flops`."""
    T = sequence_length(cfg, model)
    return (f"ablate: model {type(model).__name__}: {get_human_readable_count(parameters)} parameters, "
            f"{get_human_readable_count(int(count_flops(model, cfg, T)))} training FLOPs per target token (T = {T})")


class LoggedLossBar(TQDMProgressBar):
    """Lightning's progress bar, also showing ``train/loss`` as last logged: read from the device at the steps it is
    logged at (every ``every`` steps, and the last), not at every step, as a ``prog_bar=True`` metric would be.

    Where stdout is not a terminal (a sweep run's ``train.log``), the training bar is drawn only when it has news: an
    epoch's first batch (benchmarks/startup.py times the first step by it), its last, and the steps the loss is logged
    at. Lightning draws it at every batch whatever tqdm's ``mininterval`` (a line a step: 500 in a quickstart run's
    log). It still counts every batch, so whatever draws it next (a validation's end, the epoch's end) shows the batch
    it is at.
    """

    def __init__(self, every: int, every_step: bool | None = None):
        super().__init__()
        self.every = every
        self.every_step = sys.stdout.isatty() if every_step is None else every_step  # None: on a terminal only
        self._shown: dict[str, float] = {}

    def _logs_loss(self, trainer: pl.Trainer) -> bool:
        step = trainer.global_step  # optimiser steps done, this one included
        return step % self.every == 0 or trainer.should_stop or step >= trainer.max_steps > 0

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        bar = self.train_progress_bar
        if self.every_step or batch_idx == 0 or batch_idx + 1 == bar.total or self._logs_loss(trainer):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        elif not bar.disable:
            bar.n = batch_idx + 1  # counted, drawn with the next news

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        if self._logs_loss(trainer) and (loss := trainer.callback_metrics.get(TRAIN_LOSS)) is not None:
            self._shown = {TRAIN_LOSS: float(loss)}
        return {**super().get_metrics(trainer, pl_module), **self._shown}


def progress(every: int, enabled: bool) -> list[pl.Callback]:
    """The run's progress callback: Lightning's bar on a terminal, a line per update off one; none when disabled."""
    if not enabled:
        return []
    return [LoggedLossBar(every=every) if sys.stdout.isatty() else ProgressLines(every=every)]


def _number(value: Any) -> str:
    return f"{float(value):.4g}"


class ProgressLines(ProgressBar):
    """Training's progress as lines, for a log file: each once, on stdout, flushed.

    ``Epoch 0: training from step 0 to 500`` when training starts (benchmarks/startup.py times the first step from
    it), ``step 1/500 · 9.8 steps/s`` after the first step, ``step 100/500 · 14.2 steps/s · train/loss 3.82`` at each
    step the loss is logged at and the last, ``validation at step 100: val/loss 3.83 · val/ppl 46.1 · val/acc
    0.0442`` after each validation. The rate counts the steps since the line before, over the time since.
    """

    def __init__(self, every: int):
        super().__init__()
        self.every, self.enabled = every, True
        self._since: tuple[int, float] | None = None  # the step and the time of the line before; None: not started
        self._first: int | None = None  # the step this fit started from

    def disable(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        self.enabled = True

    def _say(self, text: str) -> None:
        if self.enabled:
            print(text, flush=True)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._since is None:  # once a fit: the epochs of a run of max_steps are the data's passes, not news
            self._since, self._first = (trainer.global_step, time.perf_counter()), trainer.global_step
            self._say(f"Epoch {trainer.current_epoch}: training from step {trainer.global_step} to "
                      f"{trainer.max_steps}")

    def _logs_loss(self, trainer: pl.Trainer) -> bool:
        step = trainer.global_step  # optimiser steps done, this one included
        return step % self.every == 0 or trainer.should_stop or step >= trainer.max_steps > 0

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        (before, then), step, now = self._since or (0, 0.0), trainer.global_step, time.perf_counter()
        logged = self._logs_loss(trainer)
        if not logged and before != self._first:
            return
        loss = trainer.callback_metrics.get(TRAIN_LOSS) if logged else None
        rate = (step - before) / (now - then) if now > then else 0.0
        self._since = (step, now)
        self._say(" · ".join([f"step {step}/{trainer.max_steps}", f"{rate:.3g} steps/s",
                              *([f"{TRAIN_LOSS} {_number(loss)}"] if loss is not None else [])]))

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        scores = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val/") and v.numel() == 1}
        self._say(f"validation at step {trainer.global_step}: "
                  + " · ".join(f"{k} {_number(v)}" for k, v in scores.items()))
