"""Data: registered tasks (synthetic, parallel text, plain-text LM), tokenizers, batching."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.data import lm, synthetic, translation  # noqa: F401

if TYPE_CHECKING:
    import pytorch_lightning as pl


def build_task(cfg: DictConfig) -> pl.LightningDataModule:
    """The data module of a run config: the registered ``data.task`` with ``data.task_args``."""
    return registry.create("task", cfg.data.task, {"data": cfg.data, "seed": cfg.seed},
                           OmegaConf.to_container(cfg.data.task_args))
