"""A sweep run's place in its study, as W&B shows it: the group of its sweep folder, and the values a dashboard
groups by.

Every run of one sweep folder logs to one W&B group, :func:`sweep_group`: the sweep's name and a token from the
folder's place (its resolved path), so two folders of one sweep name (``--out``) never mix and a relaunch of a folder
stays in its group (a folder moved elsewhere starts a new group). Under a W&B agent the token is the W&B sweep's id:
every machine's agents train one study. A run's ``wandb.study`` (filled by the sweep's planner) says which row,
variant and seed it is; the W&B logger puts it, with ``sweep`` (the group), at the top of the run's W&B config, beside
every swept key's dotted name.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any


TAG_LENGTH = 64  # W&B refuses longer tags


def sweep_group(sweep_dir: Path, name: str) -> str:
    """The W&B group of a sweep folder: ``<name>-<token>``, the same at every call for one folder, written nowhere (a
    dry run gives the group its launch will give).

    Args:
        sweep_dir: the sweep's folder.
        name: the sweep's name.
    """
    # an agent's point: its W&B sweep, shared by every machine's agents; else the folder's place
    token = os.environ.get("WANDB_SWEEP_ID") or hashlib.sha256(str(Path(sweep_dir).resolve()).encode()).hexdigest()[:8]
    return f"{name}-{token}"


def tag(key: str, value: Any) -> str:
    """A W&B tag naming a changed key and its value, ``model.positional=rope``, cut to W&B's 64 characters."""
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{key}={text}"[:TAG_LENGTH]
