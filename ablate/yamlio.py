"""Reading config and sweep files: the one place that turns a file into data, or into one line saying why not.

- Numbers in any form: ``5e-4`` and ``1e3`` are floats, as in YAML 1.2 and W&B (PyYAML follows YAML 1.1, where
  ``lr: 5e-4`` would be the string "5e-4").
- A number YAML 1.1 and YAML 1.2 read differently is an error, in a file and in a ``key=value`` override alike:
  ``010`` (octal 8 in YAML 1.1, 10 in YAML 1.2) and ``1:30`` (base 60: 90). Write ``8``, ``10`` or ``'1:30'``.
- A key given twice in one mapping is an error (PyYAML keeps the last without a word: ``model:`` twice, and the
  first block is gone); so is a key that is not a name (``~: 1``, ``3: x``).
- A missing, unreadable, binary or oversized file, invalid YAML, and aliases that expand past
  :data:`MAX_NODES` values (a "billion laughs" file) raise :class:`ablate.errors.ConfigError` naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from ablate.errors import ConfigError

MAX_BYTES = 1 << 20  # a config or sweep file is a few kB; anything past 1 MiB is not one
MAX_NODES = 100_000  # values a file may expand to through its aliases


YAML11_NUMBER = re.compile(r"[-+]?0[0-7_]+|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")  # octal, base 60
_TOKEN = re.compile(r"[^\s\[\]{},'\"]+|'[^']*'|\"[^\"]*\"")  # the plain words of an override's value, and its quotes


def yaml11_number(text: str) -> str | None:
    """Why ``text`` (a scalar, or an override's value: ``[010, 2]``) is refused: the first plain word in it that
    YAML 1.1 reads as an octal or base-60 number, with what each version reads; None when there is none."""
    for word in _TOKEN.findall(text):
        if word[0] in "'\"" or not YAML11_NUMBER.fullmatch(word):
            continue
        v11 = yaml.safe_load(word)
        if ":" in word:
            return (f"{word} is a number in base 60 to YAML 1.1 ({v11}) and text to YAML 1.2: write {v11}, or quote it "
                    "for text")
        if v11 != int(word.replace("_", "")):
            return (f"{word} is octal to YAML 1.1 ({v11}) and decimal to YAML 1.2 ({int(word.replace('_', ''))}): "
                    "write the number without its leading zero")
    return None


class _Loader(yaml.SafeLoader):
    """A safe loader that also reads exponent floats without a dot, and refuses a key given twice or not a name."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: later keys override it, as YAML says
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key_node.value or '~'!r} (line {line}) is not a name", key_node.start_mark)
            if isinstance(key, Hashable) and key in lines:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (lines {lines[key]} and {line}); keep one",
                    key_node.start_mark)
            lines[key] = line
        return super().construct_mapping(node, deep=deep)


def _number(loader: _Loader, node: yaml.ScalarNode) -> Any:
    """An int or float scalar, unless YAML 1.1 and 1.2 read it differently (:func:`yaml11_number`)."""
    if node.style is None and (why := yaml11_number(node.value)):
        raise yaml.constructor.ConstructorError(None, None, f"{why} (line {node.start_mark.line + 1})", node.start_mark)
    if node.tag.endswith(":int"):
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    return yaml.SafeLoader.construct_yaml_float(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _number)
_Loader.add_constructor("tag:yaml.org,2002:float", _number)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _expanded(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values ``node`` stands for once every alias is expanded (shared nodes counted at each use)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias counts once
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded(k, memo) + _expanded(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[id(node)] = size
    return size


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with the rules of this module.

    Raises:
        yaml.YAMLError: the text is not valid YAML, gives a key twice or a key that is not a name, or expands past
            :data:`MAX_NODES` values, or nests past Python's recursion limit.
    """
    try:
        node = yaml.compose(text, Loader=_Loader)  # noqa: S506  (a SafeLoader subclass)
        if node is not None and _expanded(node, {}) > MAX_NODES:
            raise yaml.YAMLError(f"its aliases expand to more than {MAX_NODES:,} values")
        return yaml.load(text, Loader=_Loader)  # noqa: S506
    except RecursionError:  # PyYAML reads nested lists and mappings by recursion: thousands deep is past Python's stack
        raise yaml.YAMLError("its lists and mappings nest deeper than Python's recursion limit") from None


def load_yaml_file(path: Path, *, key: str, source: str) -> Any:
    """The data in a config or sweep file.

    Args:
        path: the file.
        key, source: what names the file in an error (``config``, ``SWEEP``) and where the name came from.

    Raises:
        ConfigError: the file is missing, not a readable text file, over :data:`MAX_BYTES`, or not valid YAML
            (naming the line and the problem).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(key, str(path), "an existing YAML file", source)
    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        raise ConfigError(key, str(path), f"a file ablate can read ({exc.strerror})", source) from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(key, str(path), f"a YAML file (this one is over {MAX_BYTES >> 20} MiB)", source)
    try:
        text = raw.decode("utf-8")
        if "\x00" in text:
            raise UnicodeError("a NUL byte")
    except UnicodeError:
        raise ConfigError(key, str(path), "a YAML text file (this one is binary)", source) from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ConfigError("yaml", where, f"valid YAML ({problem})", str(path)) from None
