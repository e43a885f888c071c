"""Exact resume: a run killed at any point and resumed is the run it replaces, bit for bit (on CPU).

What decides what happens next travels in every checkpoint, through this callback's state:

- where the training data stands: the epoch and the number of batches consumed in it, counted when a
  batch reaches the training step (not when Lightning prefetches it). On resume the task's next
  training loader starts there (:meth:`ablate.data.task.Task.resume_from`); the order of an epoch is
  a function of (seed, epoch) alone.
- the random states of torch (CPU, and every CUDA device), numpy and Python, as they were after the
  last trained batch; restored just before the first batch after the resume.

And nothing but training draws from them: validation (with ``val/bleu`` decoding) runs between a
snapshot of the random states and their restoration, so how often a run validates does not change
its trajectory. Checkpoints are written after that restoration (Lightning runs checkpoint callbacks
last), so they hold the training states.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch


def rng_states() -> dict[str, Any]:
    """Every random state training draws from, in types a ``weights_only`` checkpoint load accepts."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss),
            "python": random.getstate(), "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_states(states: dict[str, Any]) -> None:
    """Restore what :func:`rng_states` returned."""
    torch.set_rng_state(states["torch"])
    name, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    random.setstate(states["python"])
    if states["cuda"] and torch.cuda.is_available() and len(states["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(states["cuda"])


class _TrainingRandomStates(pl.Callback):
    """The random states after the last trained batch: kept for the checkpoint, put back after each validation (which
    may draw from them: loaders, decoding), and, on resume, put back just before the first batch."""

    def __init__(self) -> None:
        self._training_states: dict[str, Any] | None = None  # the random states after the last trained batch
        self._loaded: dict[str, Any] | None = None  # the state a resume loaded, until its first batch

    def training_states(self) -> dict[str, Any]:
        return self._training_states or rng_states()

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if self._loaded is not None:  # the first batch after a resume: the random states of the interrupted run
            set_rng_states(self._loaded["rng"])
            self._loaded = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._training_states = rng_states()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Whatever validation drew (loaders, decoding), training goes on with its own random states."""
        if self._training_states is not None and not trainer.sanity_checking:
            set_rng_states(self._training_states)


class ExactResume(_TrainingRandomStates):
    """Keeps the training data position and random states in checkpoints, and validation off the training RNG.

    ``exact`` is False when the run's task cannot start mid-epoch (a user task without
    ``resume_from``): such a resume repeats the epoch's first batches, and result.json says so.
    """

    def __init__(self) -> None:
        super().__init__()
        self.epoch, self.batches = 0, 0  # the epoch of the last trained batch, and the batches trained in it
        self.exact = True

    @property
    def state_key(self) -> str:
        return "ExactResume"

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "batches": self.batches, "rng": self.training_states()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._loaded = state_dict
        self.epoch, self.batches = state_dict["epoch"], state_dict["batches"]

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Before the training loader exists: tell the task where to start."""
        if self._loaded is None:
            return
        resume_from = getattr(trainer.datamodule, "resume_from", None)
        if resume_from is None:
            self.exact = False
        else:
            resume_from(self.epoch, self.batches)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Not called when a run resumes in the middle of an epoch: the count goes on from the checkpoint's.
        self.epoch, self.batches = trainer.current_epoch, 0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)
        self.batches += 1


class ArrayResume(_TrainingRandomStates):
    """:class:`ExactResume` for a seed array (:mod:`ablate.train.array`): every member's data position (the
    ``position`` each stacked batch carries: :mod:`ablate.data.members`) and the random states, in the array's
    checkpoint; validation off the training random streams."""

    def __init__(self) -> None:
        super().__init__()
        self.positions: list[list[int]] | None = None  # per member: (epoch, batches done) after the last trained batch

    @property
    def state_key(self) -> str:
        return "ArrayResume"

    def state_dict(self) -> dict[str, Any]:
        return {"positions": self.positions, "rng": self.training_states()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._loaded, self.positions = state_dict, state_dict["positions"]

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._loaded is not None and self.positions is not None:
            trainer.datamodule.resume_from(self.positions)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)
        self.positions = batch["position"]
