"""Reading a trained run back: checkpoint averaging, ``ablate evaluate`` (sacreBLEU on decoded translations),
``ablate generate`` and ``ablate attention``.

Names are imported on first use, so that ``ablate.evaluate.cli`` (loaded by every ``ablate``
command) does not import Lightning and sacreBLEU up front.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "average_checkpoints": "average",
    "last_checkpoints": "average",
    "evaluate_run": "evaluate",
    "generate_run": "generate",
    "plot_attention": "attention_plot",
    "load_run_model": "load",
    "add_evaluate_parser": "cli",
}
__all__ = ["add_evaluate_parser", "average_checkpoints", "evaluate_run", "generate_run", "last_checkpoints",
           "load_run_model", "plot_attention"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ablate.evaluate' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ablate.evaluate.{_EXPORTS[name]}"), name)
