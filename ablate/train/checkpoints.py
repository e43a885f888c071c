"""Checkpoints: written atomically (a killed process leaves the previous checkpoint, never half a file), and
the last k kept for checkpoint averaging (section 6.1).

A run with ``train.keep_checkpoints=k`` keeps the weights of its last k step checkpoints, one at every step that is a
positive multiple of :func:`checkpoint_every` (never step 0; the last step only when it is such a multiple), as
``checkpoints/step-<step>.ckpt``. A solo run writes them through Lightning (:func:`step_checkpoint_callback`), each
member of a seed array through :func:`keep_step_weights` (:class:`ablate.train.members.Members`): the same steps, the
same files.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.plugins.io import TorchCheckpointIO

from ablate.runs.files import (CHECKPOINT_SUFFIX, LAST_STEM, STEP_STEM, TEMPORARY_SUFFIX, checkpoints_dir,
                               step_checkpoint, step_checkpoints, step_of)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch.save checkpointing, through a temporary file renamed into place."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        try:
            super().save_checkpoint(checkpoint, tmp, storage_options)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def clear_checkpoints(folder: Path) -> list[Path]:
    """Remove the checkpoints in ``folder`` (and temporary files a killed writer left) before a run starts over from
    its first step: they are an earlier attempt's (its last.ckpt deleted, being truncated), and a best.ckpt or step
    checkpoint left there would be read as this run's. Returns what was removed."""
    folder = Path(folder)
    found = (*folder.glob(f"*{CHECKPOINT_SUFFIX}"), *folder.glob(".*.tmp"))
    stale = [p for p in found if p.is_file() or p.is_symlink()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def checkpoint_every(cfg: Any) -> int:
    """The steps between two step checkpoints: ``train.checkpoint_every``, else ``train.val_every``."""
    return cfg.train.checkpoint_every or cfg.train.val_every


def last_checkpoint_callback(dirpath: str | Path) -> ModelCheckpoint:
    """A ModelCheckpoint that writes ``<dirpath>/last.ckpt`` (weights, optimiser, loop and random states: what a run,
    or a seed array, resumes from) at every validation, replacing the one before.

    No monitor: with one, Lightning (2.6) writes ``save_last`` only at a validation whose monitored value improved, so
    a run whose val/loss had stopped improving kept an older step's last.ckpt (a run of 40 steps ended with step 30's
    weights there). The best validation's weights are :class:`ablate.train.life.BestWeights`'s.
    """
    return ModelCheckpoint(dirpath=dirpath, filename=LAST_STEM, save_top_k=1, enable_version_counter=False)


def step_checkpoint_callback(dirpath: str | Path, *, every_n_train_steps: int, keep: int) -> ModelCheckpoint:
    """A ModelCheckpoint that keeps the last ``keep`` checkpoints, one every ``every_n_train_steps`` steps,
    as ``<dirpath>/step-<step>.ckpt`` (weights only: averaging needs no optimiser state).

    Saved at the end of the step itself: left to itself, Lightning (2.6) puts off a step checkpoint that falls on the
    last batch of an epoch until the next validation (meant for a monitor that validation logs), and names it by that
    validation's step (``checkpoint_every=5`` with 5 batches an epoch and ``val_every=8`` kept steps 8, 16 and 24, not
    5, 10, 15 and 20). ``save_on_train_epoch_end`` turns that off; with ``every_n_epochs`` 0 it saves nothing more.
    """
    return ModelCheckpoint(
        dirpath=dirpath,
        filename=f"{STEP_STEM}{{step}}",
        auto_insert_metric_name=False,  # step-1200.ckpt, not step-step=1200.ckpt
        every_n_train_steps=every_n_train_steps,
        save_top_k=keep,
        monitor="step",  # the largest steps are the "best": the newest k are kept
        mode="max",
        save_weights_only=True,
        enable_version_counter=False,  # a step saved again after a resume replaces its file
        save_on_train_epoch_end=True,  # at its own step (see above)
    )


def save_weights(path: Path, state_dict: dict[str, Any], cfg: Any, step: int) -> None:
    """A weights-only checkpoint in the layout of a solo run's (``state_dict`` under the ``model.`` prefix of
    :class:`ablate.train.system.TransformerSystem`, the run config as its hyperparameters), written atomically:
    what ``ablate evaluate`` and checkpoint averaging read."""
    checkpoint = {"state_dict": {f"model.{k}": v for k, v in state_dict.items()}, "global_step": step,
                  "hyper_parameters": {"config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)}}
    AtomicCheckpointIO().save_checkpoint(checkpoint, path)


def keep_step_weights(run_dir: Path, state_dict: dict[str, Any], cfg: Any, step: int, keep: int) -> None:
    """Write the step checkpoint of ``step`` (:func:`save_weights`) and remove the run's older ones past the newest
    ``keep``: what :func:`step_checkpoint_callback` leaves a solo run, for a run trained elsewhere (a seed array's
    member)."""
    save_weights(step_checkpoint(run_dir, step), state_dict, cfg, step)
    for path in step_checkpoints(run_dir)[:-keep]:
        path.unlink(missing_ok=True)


def drop_step_checkpoints_after(run_dir: Path, step: int) -> list[Path]:
    """Remove the run's step checkpoints of steps after ``step``, and any a killed writer left half-written: an
    attempt that resumes at ``step`` (0: starts over) writes them again. Returns what was removed."""
    folder = checkpoints_dir(run_dir)
    stale = [p for p in step_checkpoints(run_dir) if step_of(p) > step]
    stale += [p for p in folder.glob(f".{STEP_STEM}*{TEMPORARY_SUFFIX}") if p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
