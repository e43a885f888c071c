"""What differs between two built models: the modules that changed, in words, for ``ablate sweep --dry-run``.

The two module trees are walked side by side. Where a module's class differs, the difference is named
there and not below; where the class is the same but its settings (``extra_repr``) differ, the settings
that changed are named, and not the sub-modules they change; a module present in only one model is added or
removed. Layer numbers are folded (``layers.*``), so a change made in every layer reads once. The decoder mask,
an object rather than a module, is compared by its ``repr``, and parameter sharing by the number of distinct
layers.
"""

from __future__ import annotations

import re

from torch import nn

_LAYER = re.compile(r"\.layers\.\d+")


def _settings(module: nn.Module) -> dict[str, str]:
    """``extra_repr`` as name=value pairs (positional parts under their index)."""
    parts = [p.strip() for p in re.split(r",\s*(?![^()]*\))", module.extra_repr()) if p.strip()]
    return dict(p.split("=", 1) if "=" in p else (f"#{i}", p) for i, p in enumerate(parts))


def _settings_change(a: nn.Module, b: nn.Module) -> str:
    before, after = _settings(a), _settings(b)
    keys = dict.fromkeys([*before, *after])
    return ", ".join(f"{k} {before.get(k, '-')} -> {after.get(k, '-')}" for k in keys if before.get(k) != after.get(k))


def _walk(a: nn.Module | None, b: nn.Module | None, path: str, out: list[str]) -> None:
    if a is None or b is None:
        present = a if b is None else b
        out.append(f"{'-' if b is None else '+'}{path} {type(present).__name__}")
        return
    if type(a) is not type(b):
        out.append(f"{path}: {type(a).__name__} -> {type(b).__name__}")
        return
    if a.extra_repr() != b.extra_repr():  # its sub-modules differ as a consequence: not named again
        out.append(f"{path}: {type(a).__name__} {_settings_change(a, b)}")
        return
    names = dict.fromkeys([*a._modules, *b._modules])
    for name in names:
        _walk(a._modules.get(name), b._modules.get(name), f"{path}.{name}" if path else name, out)


def module_changes(base: nn.Module, model: nn.Module, limit: int = 4) -> list[str]:
    """The differences between ``base`` and ``model`` (built from two configs), most general first.

    Returns:
        Lines such as ``encoder.layers.*.ffn: FeedForward -> GatedFeedForward``; at most ``limit``, the last
        saying how many more there are; empty when the two are built alike.
    """
    found: list[str] = []
    _walk(base, model, "", found)
    for name in ("mask",):
        a, b = getattr(base, name, None), getattr(model, name, None)
        if repr(a) != repr(b):
            found.append(f"{name}: {a!r} -> {b!r}")
    before, after = _distinct_layers(base), _distinct_layers(model)
    if before != after:
        found.append(f"distinct layers per stack: {before} -> {after}")
    folded = _group(list(dict.fromkeys(_LAYER.sub(".layers.*", line) for line in found)))
    if len(folded) > limit:
        folded = folded[: limit - 1] + [f"... and {len(folded) - limit + 1} more"]
    return folded


def _group(lines: list[str]) -> list[str]:
    """One line per change made in several places (a stack's shared positional component is in every layer):
    named by the places' common last name, or the first place and a count."""
    places: dict[str, list[str]] = {}
    for line in lines:
        path, sep, change = line.partition(": ")
        places.setdefault(change if sep else line, []).append(path if sep else "")
    out = []
    for change, paths in places.items():
        if not paths[0]:
            out.append(change)
            continue
        leaves = {p.rsplit(".", 1)[-1] for p in paths}
        name = leaves.pop() if len(leaves) == 1 and len(paths) > 1 else paths[0]
        more = f" (+{len(paths) - 1} more places)" if len(paths) > 1 and name == paths[0] else ""
        out.append(f"{name}: {change}{more}")
    return out


def _distinct_layers(model: nn.Module) -> list[int]:
    """How many different layer modules each stack holds (fewer than its layers when they are shared)."""
    return [len({id(layer) for layer in stack.layers}) for stack in model.children() if hasattr(stack, "layers")]
