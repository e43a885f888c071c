"""Variants registered under each kind: their factories, the config keys they read, lookup, argument checks, builds."""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ablate.errors import ConfigError
from ablate.registry.kinds import _KINDS, _REGISTRY, CONTEXT, Kind, kind
from ablate.registry.signature import Param, RegistrationError, fits, missing_members, parameters_of, product_of


@dataclass(frozen=True)
class Entry:
    """A registered variant: its factory, where it came from, and the config keys it reads."""

    kind: str
    name: str
    factory: Callable[..., Any]
    description: str
    module: str
    extra_reads: tuple[str, ...] = ()  # config keys read beyond those its context names (tasks: data.*)
    not_fusable: str | None = None  # why its runs cannot train as a seed array (ablate.train.fused); None: they can

    def _split(self) -> tuple[list[Param], set[str]]:
        key = (id(self), len(_KINDS))  # a kind declared later turns a parameter of its name into context
        if key not in _SPLITS:
            own, context = [], set()
            for p in parameters_of(self.factory):
                if p.name in CONTEXT or p.name in _KINDS:
                    context.add(p.name)
                else:
                    own.append(p)
            _SPLITS[key] = (own, context)
        return _SPLITS[key]

    @property
    def params(self) -> tuple[Param, ...]:
        """The parameters a user sets under ``<key>_args``."""
        return tuple(self._split()[0])

    @property
    def context(self) -> frozenset[str]:
        """The names the assembler supplies (dimensions, built components of other kinds)."""
        return frozenset(self._split()[1])

    def reads(self) -> frozenset[str]:
        """The config keys this variant reads: from its context, its sub-components' kinds, and ``reads=``.
        A key ending in a dot stands for a whole section (a task that does not say which data keys it reads)."""
        keys = {CONTEXT[c] for c in self.context if CONTEXT.get(c)} | set(self.extra_reads)
        keys |= {_KINDS[c].key for c in self.context if c in _KINDS}
        if self.extra_reads:
            keys -= {CONTEXT[c] for c in self.context if (CONTEXT.get(c) or "").endswith(".")}
        return frozenset(keys)


_SPLITS: dict[tuple[int, int], tuple[list[Param], set[str]]] = {}


def _check_interface(kind: Kind, name: str, factory: Any) -> None:
    product = product_of(factory)
    if product is None:
        return  # an unannotated function: its product is checked when it is built (see create)
    if not issubclass(product, kind.interface) or inspect.isabstract(product):
        missing = missing_members(product, kind.interface) or ["a subclass of it"]
        raise RegistrationError(
            f"cannot register {kind.name} {name!r}: {product.__qualname__} does not implement "
            f"{kind.interface.__module__}.{kind.interface.__qualname__} (missing: {', '.join(missing)})")


def summary(factory: Any) -> str:
    """The first paragraph of ``factory``'s docstring on one line ("" without one): a summary wrapped
    to keep within 120 columns reads as the one line it was."""
    paragraph = (inspect.getdoc(factory) or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def register(kind: str, name: str, description: str | None = None, *,
             reads: Iterable[str] = (), not_fusable: str | None = None) -> Callable[[Any], Any]:
    """Register a component factory under ``kind`` and ``name``.

    Args:
        kind: a declared kind, e.g. ``"positional"``.
        name: the name configs use to select it, e.g. ``"learned"``.
        description: one line for ``ablate components``, with the paper it comes from; defaults to
            the first paragraph of the factory's docstring, its lines joined (see :func:`summary`).
        reads: config keys it reads besides those its context names (a task's ``data.*`` keys).
        not_fusable: why a model with it cannot train its seeds as one fused model (a seed array,
            :mod:`ablate.train.fused`), in one line, e.g. "routes tokens by data-dependent indices"; None (the
            default): it fuses, which ``tests/train/test_fusable.py`` checks for every registered variant.

    Raises:
        RegistrationError: the kind is unknown, the name is taken, or the factory does not make
            an instance of the kind's interface.
    """

    def decorate(factory: Any) -> Any:
        if kind not in _KINDS:
            raise RegistrationError(f"cannot register {name!r}: unknown component kind {kind!r}; kinds: "
                                    f"{', '.join(sorted(_KINDS))} (declare a new one with ablate.declare_kind)")
        if name in _REGISTRY[kind]:
            prev = _REGISTRY[kind][name]
            raise RegistrationError(
                f"{kind} {name!r} is already registered (by {prev.module}.{prev.factory.__qualname__})")
        _check_interface(_KINDS[kind], name, factory)
        doc = description or summary(factory)
        _REGISTRY[kind][name] = Entry(kind=kind, name=name, factory=factory, description=doc,
                                      module=getattr(factory, "__module__", "?"), extra_reads=tuple(reads),
                                      not_fusable=not_fusable)
        return factory

    return decorate


def unregister(kind: str, name: str) -> None:
    """Remove a registered variant (tests that register their own undo it here).

    Raises:
        RegistrationError: ``kind`` has no variant ``name``.
    """
    if name not in _REGISTRY.get(kind, {}):
        raise RegistrationError(f"cannot unregister {kind} {name!r}: it is not registered")
    del _REGISTRY[kind][name]


def version() -> tuple[int, int]:
    """Changes whenever a kind is declared or a variant registered (a key for caches of what the registry holds)."""
    return len(_KINDS), sum(len(v) for v in _REGISTRY.values())


def entries(kind_name: str) -> list[Entry]:
    """Every registered variant of a kind, sorted by name."""
    kind(kind_name)
    return [_REGISTRY[kind_name][n] for n in sorted(_REGISTRY[kind_name])]


def names(kind_name: str) -> list[str]:
    """The registered names of a kind."""
    return [e.name for e in entries(kind_name)]


def get(kind_name: str, name: str, *, key: str | None = None) -> Entry:
    """Look up a variant; an unknown name is a ConfigError listing the names and the closest one."""
    known = names(kind_name)
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(key or _KINDS[kind_name].key, name, f"one of {', '.join(known)}{hint}")
    return _REGISTRY[kind_name][name]


def check_args(kind_name: str, name: str, args: Mapping[str, Any], *, key: str) -> None:
    """Check a variant's user parameters against its signature.

    Raises:
        ConfigError: an unknown parameter, a missing required one, or a value of the wrong type.
    """
    entry = get(kind_name, name, key=key.removesuffix("_args"))
    allowed = {p.name: p for p in entry.params}
    for arg, value in args.items():
        if arg not in allowed:
            choices = ", ".join(allowed) or "none"
            raise ConfigError(f"{key}.{arg}", value, f"a parameter of {kind_name} {name!r} ({choices})")
        ann = allowed[arg].annotation
        if ann in (int, float, bool, str) and not fits(value, ann):
            raise ConfigError(f"{key}.{arg}", value, f"a {ann.__name__}")
    for p in entry.params:
        if p.required and p.name not in args:
            raise ConfigError(f"{key}.{p.name}", "missing", f"a value: {kind_name} {name!r} requires it")


def create(kind_name: str, name: str, context: Mapping[str, Any], args: Mapping[str, Any] | None = None,
           *, build: Callable[[str], Any] | None = None) -> Any:
    """Build a variant: the context values it declares, components of the kinds it names, and its ``args``.

    Args:
        kind_name, name: which variant.
        context: values by :data:`CONTEXT` name.
        args: its own parameters (``<key>_args``).
        build: builds the configured component of a kind, for a factory parameter named like a kind.

    Raises:
        TypeError: the factory made something that is not an instance of the kind's interface.
    """
    entry = get(kind_name, name)
    kwargs = {}
    for c in entry.context:
        if c in context:
            kwargs[c] = context[c]
        elif c in _KINDS and build is not None:
            kwargs[c] = build(c)
    kwargs.update(args or {})
    product = entry.factory(**kwargs)
    interface = _KINDS[kind_name].interface
    if not isinstance(product, interface):
        raise TypeError(f"{kind_name} {name!r} ({entry.module}.{entry.factory.__qualname__}) built a "
                        f"{type(product).__qualname__}, not a {interface.__qualname__}")
    return product
