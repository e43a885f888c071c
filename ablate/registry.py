"""The component registry: every swappable part is registered by kind and name.

Configs name components (``model.positional: learned``), never import paths. A
component is a factory (a class or a function) whose keyword arguments are split
in two: the ones the assembler supplies from the model's dimensions (the
*context*: ``d_model``, ``n_heads``, ``d_k`` ...) and the component's own
parameters, which users set in YAML under ``<key>_args`` (``model.mask_args.window``).

    @register("positional", "learned")
    class LearnedPositional(nn.Module):
        def __init__(self, *, d_model: int, max_len: int = 1024): ...

User code registers its variants the same way, and is imported through the
``imports:`` config key, the ``--import`` CLI flag, or the ``ablate.components``
entry-point group of an installed package.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping

from ablate.errors import ConfigError

ENTRY_POINT_GROUP = "ablate.components"

# Names the assembler may pass to a factory; a factory takes those it declares.
CONTEXT_KEYS = frozenset(
    {"d_model", "n_heads", "d_k", "d_v", "d_ff", "dropout", "norm", "max_steps", "lr", "data", "seed"}
)


@dataclass(frozen=True)
class Param:
    """One user-settable parameter of a component."""

    name: str
    annotation: Any
    default: Any  # inspect.Parameter.empty when required

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty

    def describe(self) -> str:
        kind = getattr(self.annotation, "__name__", str(self.annotation))
        return f"{self.name}: {kind}" + ("" if self.required else f" = {self.default!r}")


@dataclass(frozen=True)
class Entry:
    """A registered component: its factory and where it came from."""

    kind: str
    name: str
    factory: Callable[..., Any]
    description: str
    module: str
    params: tuple[Param, ...] = field(default=())
    context: frozenset[str] = field(default=frozenset())


_REGISTRY: dict[str, dict[str, Entry]] = {}
_KINDS: dict[str, str] = {}
_entry_points_loaded = False


def define_kind(kind: str, description: str) -> None:
    """Declare a kind of component (``positional``, ``mask`` ...) with a one-line description."""
    _KINDS.setdefault(kind, description)
    _REGISTRY.setdefault(kind, {})


def _signature(factory: Callable[..., Any]) -> tuple[tuple[Param, ...], frozenset[str]]:
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = inspect.get_annotations(target, eval_str=True)
    except Exception:  # unresolvable annotations: fall back to the raw ones
        hints = {}
    params, context = [], set()
    for p in inspect.signature(target).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in CONTEXT_KEYS:
            context.add(p.name)
        else:
            params.append(Param(p.name, hints.get(p.name, p.annotation), p.default))
    return tuple(params), frozenset(context)


def register(kind: str, name: str, description: str | None = None) -> Callable[[Any], Any]:
    """Register a component factory under ``kind`` and ``name``.

    Args:
        kind: the kind of component, e.g. ``"positional"``; must be a defined kind.
        name: the name configs use to select it, e.g. ``"learned"``.
        description: one line for ``ablate components``; defaults to the
            first line of the factory's docstring.

    Raises:
        ValueError: the kind is unknown or the name is already taken.
    """

    def decorate(factory: Any) -> Any:
        if kind not in _REGISTRY:
            raise ValueError(f"unknown component kind {kind!r}; kinds: {', '.join(sorted(_REGISTRY))}")
        if name in _REGISTRY[kind]:
            prev = _REGISTRY[kind][name]
            raise ValueError(
                f"{kind} {name!r} is already registered (by {prev.module}.{prev.factory.__qualname__})"
            )
        doc = description or (inspect.getdoc(factory) or "").strip().splitlines()[:1]
        params, context = _signature(factory)
        _REGISTRY[kind][name] = Entry(
            kind=kind,
            name=name,
            factory=factory,
            description=doc if isinstance(doc, str) else (doc[0] if doc else ""),
            module=getattr(factory, "__module__", "?"),
            params=params,
            context=context,
        )
        return factory

    return decorate


def load_plugins() -> None:
    """Import the built-in components and those of installed packages (entry points), once."""
    global _entry_points_loaded
    import ablate.components  # noqa: F401  (registers the built-ins)
    import ablate.data  # noqa: F401
    import ablate.train.schedules  # noqa: F401

    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()


def import_modules(modules: list[str] | tuple[str, ...]) -> None:
    """Import user modules that register components (the ``imports`` key).

    The current directory is on the path, so ``imports: [my_components]`` finds
    ``./my_components.py``.

    Raises:
        ConfigError: a module cannot be imported.
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError("imports", module, f"an importable module ({exc})") from exc


def kinds() -> dict[str, str]:
    """Every kind with its description."""
    load_plugins()
    return dict(sorted(_KINDS.items()))


def entries(kind: str) -> list[Entry]:
    """Every registered component of ``kind``, sorted by name."""
    load_plugins()
    if kind not in _REGISTRY:
        raise ConfigError("kind", kind, f"one of {', '.join(sorted(_REGISTRY))}")
    return [_REGISTRY[kind][n] for n in sorted(_REGISTRY[kind])]


def names(kind: str) -> list[str]:
    """The registered names of ``kind``."""
    return [e.name for e in entries(kind)]


def get(kind: str, name: str, *, key: str | None = None) -> Entry:
    """Look up a component; an unknown name is a ConfigError listing the names and the closest one."""
    known = names(kind)
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(key or kind, name, f"one of {', '.join(known)}{hint}")
    return _REGISTRY[kind][name]


def check_args(kind: str, name: str, args: Mapping[str, Any], *, key: str) -> None:
    """Check a component's user parameters against its signature.

    Raises:
        ConfigError: an unknown parameter, a missing required one, or a value of the wrong type.
    """
    entry = get(kind, name, key=key.removesuffix("_args"))
    allowed = {p.name: p for p in entry.params}
    for arg, value in args.items():
        if arg not in allowed:
            choices = ", ".join(allowed) or "none"
            raise ConfigError(f"{key}.{arg}", value, f"a parameter of {kind} {name!r} ({choices})")
        ann = allowed[arg].annotation
        if ann in (int, float, bool, str) and not _fits(value, ann):
            raise ConfigError(f"{key}.{arg}", value, f"a {ann.__name__}")
    for p in entry.params:
        if p.required and p.name not in args:
            raise ConfigError(f"{key}.{p.name}", "missing", f"a value: {kind} {name!r} requires it")


def _fits(value: Any, ann: type) -> bool:
    if ann is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, ann)


def create(kind: str, name: str, context: Mapping[str, Any], args: Mapping[str, Any] | None = None) -> Any:
    """Build a component: the context values it declares plus its own ``args``."""
    entry = get(kind, name)
    kwargs = {k: context[k] for k in entry.context if k in context}
    kwargs.update(args or {})
    return entry.factory(**kwargs)


define_kind("positional", "position information: added to embeddings, or applied to queries and keys")
define_kind("mask", "decoder self-attention mask (True = may attend); key padding always applies")
define_kind("ffn", "position-wise feed-forward network of size d_ff")
define_kind("norm", "normalisation layer")
define_kind("norm_position", "where the norm sits around each residual sub-layer")
define_kind("schedule", "learning-rate schedule (absolute lr per optimiser step)")
define_kind("task", "a data module: synthetic tasks, parallel text, plain-text language modelling")
