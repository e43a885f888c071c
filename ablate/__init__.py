"""ablate: Transformer ablation studies. Swap one component, train, compare.

Importing ablate declares the built-in kinds and registers their variants (light modules: torch, no
Lightning), so a user's module can register against them straight away; the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

_EXPORTS = {
    "load_config": "ablate.config",
    "build_model": "ablate.model",
    "count_parameters": "ablate.model",
    "attention_weights": "ablate.model",
    "register": "ablate.registry",
    "declare_kind": "ablate.registry",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ablate' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


import ablate.components  # noqa: E402,F401  (the built-in kinds and their variants)
import ablate.data  # noqa: E402,F401  (the built-in tasks)
