"""Data: registered tasks (synthetic, parallel text, plain-text LM), tokenizers, batching.

Importing this package registers the built-in tasks; their modules (Lightning, datasets) load when a task is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, read_write

from ablate import registry
from ablate.paths import locate_data, looked_in
from ablate.errors import ConfigError
from ablate.data import tasks  # noqa: F401  (registers the built-in tasks)

if TYPE_CHECKING:
    from ablate.data.task import Task


def build_task(cfg: DictConfig) -> Task:
    """The data module of a run config: the registered ``data.task`` with ``data.task_args``, given ``data.path``
    where it is (looked for in the folders the run recorded, ``paths.data``: :mod:`ablate.paths`).

    Raises:
        ConfigError: a relative ``data.path`` that names a local path (``./``, ``../``, ``~``) is in none of them.
    """
    data = cfg.data
    if data.get("path") and "paths" in cfg:
        folders = list(cfg.paths.data)
        located = locate_data(str(data.path), folders)
        if located == str(data.path) and folders and str(data.path).startswith((".", "~")) \
                and not Path(located).expanduser().exists():
            raise ConfigError("data.path", data.path, f"an existing file or folder ({looked_in(folders)})")
        if located != str(data.path):
            data = data.copy()
            with read_write(data):
                data.path = located
    return registry.create("task", cfg.data.task, {"data": data, "seed": cfg.seed},
                           OmegaConf.to_container(cfg.data.task_args))
