"""Data: registered tasks (synthetic, parallel text, plain-text LM), tokenizers, batching.

Importing this package registers the built-in tasks; their modules (Lightning, datasets) load when a task is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.data import tasks  # noqa: F401  (registers the built-in tasks)

if TYPE_CHECKING:
    from ablate.data.task import Task


def build_task(cfg: DictConfig) -> Task:
    """The data module of a run config: the registered ``data.task`` with ``data.task_args``."""
    return registry.create("task", cfg.data.task, {"data": cfg.data, "seed": cfg.seed},
                           OmegaConf.to_container(cfg.data.task_args))
