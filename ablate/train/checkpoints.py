"""Checkpoints: written atomically (a killed process leaves the previous checkpoint, never half a file), and
the last k kept for checkpoint averaging (section 6.1)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.plugins.io import TorchCheckpointIO

from ablate.runs.files import CHECKPOINT_SUFFIX


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


def step_checkpoint_callback(dirpath: str | Path, *, every_n_train_steps: int, keep: int) -> ModelCheckpoint:
    """A ModelCheckpoint that keeps the last ``keep`` checkpoints, one every ``every_n_train_steps`` steps,
    as ``<dirpath>/step-<step>.ckpt`` (weights only: averaging needs no optimiser state)."""
    return ModelCheckpoint(
        dirpath=dirpath,
        filename="step-{step}",
        auto_insert_metric_name=False,  # step-1200.ckpt, not step-step=1200.ckpt
        every_n_train_steps=every_n_train_steps,
        save_top_k=keep,
        monitor="step",  # the largest steps are the "best": the newest k are kept
        mode="max",
        save_weights_only=True,
        enable_version_counter=False,  # a step saved again after a resume replaces its file
    )


def save_weights(path: Path, state_dict: dict[str, Any], cfg: Any, step: int) -> None:
    """A weights-only checkpoint in the layout of a solo run's (``state_dict`` under the ``model.`` prefix of
    :class:`ablate.train.system.TransformerSystem`, the run config as its hyperparameters), written atomically:
    what ``ablate evaluate`` and checkpoint averaging read."""
    checkpoint = {"state_dict": {f"model.{k}": v for k, v in state_dict.items()}, "global_step": step,
                  "hyper_parameters": {"config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)}}
    AtomicCheckpointIO().save_checkpoint(checkpoint, path)
