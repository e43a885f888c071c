"""Checkpoint averaging (section 6.1: the base models average the last 5 checkpoints, the big ones 20).

A run keeps its last k checkpoints as ``<run_dir>/checkpoints/step-<step>.ckpt`` (written by
:func:`ablate.train.checkpoints.step_checkpoint_callback`); :func:`average_checkpoints` averages their
weights into one state dict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from ablate.errors import ConfigError
from ablate.runs.files import step_checkpoints

def last_checkpoints(run_dir: str | Path, k: int) -> list[Path]:
    """The run's last ``k`` step checkpoints, oldest first.

    Raises:
        ConfigError: ``k`` is not positive, or the run kept fewer than ``k``.
    """
    found = step_checkpoints(run_dir)
    if not found:
        raise ConfigError("--average-last", k, f"0: the run kept no step checkpoints in "
                          f"{Path(run_dir) / 'checkpoints'} (train with train.keep_checkpoints=K to keep the last K)")
    if k < 1 or len(found) < k:
        raise ConfigError("--average-last", k, f"1 .. {len(found)}: the step-*.ckpt files in "
                          f"{Path(run_dir) / 'checkpoints'}")
    return found[-k:]


def _aliases(state: dict[str, Any]) -> dict[str, str]:
    """Each key whose tensor shares memory with an earlier key (tied weights) -> that earlier key."""
    first: dict[tuple, str] = {}
    aliases = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            where = (value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape), value.stride())
            if where in first:
                aliases[key] = first[where]
            else:
                first[where] = key
    return aliases


def average_state_dicts(states: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The element-wise mean of state dicts with the same keys, read one at a time.

    Floating-point tensors are averaged (summed in float64, returned in their dtype). Other values
    (integer counters, boolean masks, non-tensors) come from the last state dict. Tied weights (keys
    sharing one tensor in the first state dict) stay one tensor in the result.

    Raises:
        ValueError: no state dicts, their keys or shapes differ, or tied weights differ in one of them.
    """
    sums: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    keys: set[str] = set()
    n, state = 0, {}
    for n, state in enumerate(states, start=1):
        if n == 1:
            aliases, keys = _aliases(state), set(state)  # a copy: the first state dict is not kept alive
        elif set(state) != keys:
            raise ValueError(f"state dict {n - 1} has other keys than state dict 0 "
                             f"(e.g. {sorted(set(state) ^ set(keys))[:5]})")
        for key, alias in aliases.items():
            if not torch.equal(state[key], state[alias]):
                raise ValueError(f"state dict {n - 1}: {key} is tied to {alias} in state dict 0 but differs here")
        for key, value in state.items():
            if key in aliases or not (isinstance(value, torch.Tensor) and value.is_floating_point()):
                continue
            if key in sums and sums[key].shape != value.shape:
                raise ValueError(f"state dict {n - 1}: {key} has shape {tuple(value.shape)}, "
                                 f"not {tuple(sums[key].shape)}")
            sums[key] = sums[key] + value.double() if key in sums else value.double()
    if n == 0:
        raise ValueError("no state dicts to average")
    out = {k: (sums[k] / n).to(v.dtype) if k in sums else v for k, v in state.items()}
    for key, alias in aliases.items():
        out[key] = out[alias]
    return out


def load_state_dict(path: str | Path) -> dict[str, Any]:
    """The ``state_dict`` of a Lightning checkpoint, on the CPU.

    Raises:
        ConfigError: the file is truncated, empty or not a Lightning checkpoint, naming it.
    """
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)  # our own run's files; they hold configs
        return checkpoint["state_dict"]
    except Exception as exc:  # RuntimeError (a cut zip), EOFError, UnpicklingError, KeyError, TypeError
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ConfigError("checkpoint", str(path), f"a Lightning checkpoint torch can load ({reason})") from None


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """The mean of the ``state_dict`` of each Lightning checkpoint in ``paths`` (see :func:`average_state_dicts`)."""
    return average_state_dicts(load_state_dict(p) for p in paths)  # one checkpoint in memory at a time
