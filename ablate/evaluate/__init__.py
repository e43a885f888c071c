"""Reading a trained run back: sacreBLEU on decoded translations, checkpoint averaging, val/bleu in training,
``ablate evaluate``, ``ablate generate`` and ``ablate attention``.

Names are imported on first use, so that ``ablate.evaluate.cli`` (loaded by every ``ablate``
command) does not import Lightning and sacreBLEU up front.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Bleu": "bleu",
    "corpus_bleu": "bleu",
    "detokenize": "bleu",
    "average_checkpoints": "average",
    "step_checkpoint_callback": "average",
    "step_checkpoints": "average",
    "ValidationBleu": "callback",
    "evaluate_run": "evaluate",
    "generate_run": "generate",
    "plot_attention": "attention_plot",
    "load_run_model": "load",
    "add_evaluate_parser": "cli",
}
__all__ = ["Bleu", "ValidationBleu", "add_evaluate_parser", "average_checkpoints", "corpus_bleu", "detokenize",
           "evaluate_run", "generate_run", "load_run_model", "plot_attention", "step_checkpoint_callback",
           "step_checkpoints"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ablate.evaluate' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ablate.evaluate.{_EXPORTS[name]}"), name)
