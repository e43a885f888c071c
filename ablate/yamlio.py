"""Reading YAML with numbers in any form: ``5e-4`` and ``1e3`` are floats, as in YAML 1.2 and W&B.

PyYAML follows YAML 1.1, where a float needs a dot: ``lr: 5e-4`` (the usual way to write a learning rate)
would be the string "5e-4". Config files and sweep files are read with this loader instead.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    """A safe loader that also reads exponent floats without a dot."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load``, with ``5e-4`` read as a float.

    Raises:
        yaml.YAMLError: the text is not valid YAML.
    """
    return yaml.load(text, Loader=_Loader)  # noqa: S506  (a SafeLoader subclass)
