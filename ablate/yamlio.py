"""Reading YAML with numbers in any form: ``5e-4`` and ``1e3`` are floats, as in YAML 1.2 and W&B; a key twice in
one mapping is an error.

PyYAML follows YAML 1.1, where a float needs a dot: ``lr: 5e-4`` (the usual way to write a learning rate)
would be the string "5e-4". It also keeps the last of two equal keys without a word (``model:`` twice, and
the first block is gone). Config files and sweep files are read with this loader instead.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    """A safe loader that also reads exponent floats without a dot and refuses a key given twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: later keys override it, as YAML says
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, Hashable) and key in lines:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (lines {lines[key]} and {line}); keep one",
                    key_node.start_mark)
            if isinstance(key, Hashable):
                lines[key] = line
        return super().construct_mapping(node, deep=deep)


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
