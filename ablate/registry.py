"""The component registry: kinds of component, declared once, and the variants registered under each.

A *kind* (``positional``, ``attention``, ``mask`` ...) is declared once, with :func:`declare_kind`: its
config key (``model.positional``), the interface every variant must implement (a base class), the
paper's default variant and a one-line description. The schema's keys, validation, ``ablate
components`` and the generated tests all read the declared kinds, so a kind declared in user code
is configured, validated and tested like a built-in one.

A *variant* is a factory (a class, or a function annotated to return one) registered under a kind:

    @register("positional", "learned")
    class LearnedPositional(Positional):
        def __init__(self, *, d_model: int, max_len: int = 1024): ...

Its keyword arguments are split in two. Those named in :data:`CONTEXT` (``d_model``, ``n_heads`` ...)
or named like a kind (``norm``) are supplied by the assembler, which builds a component of that kind
for the latter; the others are the variant's own parameters, set in YAML under ``<key>_args``
(``model.positional_args.max_len``). The context a factory takes says which config keys it reads
(:meth:`Entry.reads`): a key that no chosen variant reads is a no-op, and ablate refuses to sweep it.

User code registers its variants (and kinds) the same way, imported through the ``imports:`` config
key, the ``--import`` flag, or the ``ablate.components`` entry-point group of an installed package.
The built-in variants are registered by importing :mod:`ablate.components` and :mod:`ablate.data`;
this module imports neither.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Iterable, Mapping

from ablate.errors import ConfigError

ENTRY_POINT_GROUP = "ablate.components"

# What the assembler can pass to a factory, and the config key each reads (None: not a config key).
CONTEXT: dict[str, str | None] = {
    "d_model": "model.d_model",
    "n_heads": "model.n_heads",
    "d_k": "model.d_k",
    "d_v": "model.d_v",
    "d_ff": "model.d_ff",
    "dropout": "model.dropout",
    "attention_dropout": "model.attention_dropout",
    "n_encoder_layers": "model.n_encoder_layers",
    "n_decoder_layers": "model.n_decoder_layers",
    "vocab_size": "data.vocab_size",
    "pad_id": "data.pad_id",
    "lr": "train.lr",
    "max_steps": "train.max_steps",
    "seed": "seed",
    # A parameter named like a kind receives a component of that kind: the one the context holds
    # (attention gets its stack's shared ``positional``), else a fresh one built from the config.
    "data": "data.",  # a task's data section: every data key, unless the task declares those it reads (``reads=``)
    "stack": None,  # "encoder" or "decoder": which stack the component is built for
    "cross": None,  # attention: True for the decoder's attention over the encoder output
    "decoder_only": None,  # True for a decoder-only language model
}


class RegistrationError(TypeError):
    """A factory that cannot be registered: unknown kind, name taken, or the kind's interface not implemented."""


@dataclass(frozen=True)
class Kind:
    """A kind of component: where it is configured, what its variants must implement, its default."""

    name: str
    key: str  # dotted config key that names the variant, e.g. "model.positional"; "<key>_args" holds its args
    interface: type  # every variant is (or returns) an instance of this
    default: str  # the paper's choice
    description: str

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def field(self) -> str:
        return self.key.split(".", 1)[1]

    @property
    def args_key(self) -> str:
        return f"{self.key}_args"


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
    """A registered variant: its factory, where it came from, and the config keys it reads."""

    kind: str
    name: str
    factory: Callable[..., Any]
    description: str
    module: str
    extra_reads: tuple[str, ...] = ()  # config keys read beyond those its context names (tasks: data.*)

    def _split(self) -> tuple[list[Param], set[str]]:
        key = (id(self), len(_KINDS))  # a kind declared later turns a parameter of its name into context
        if key not in _SPLITS:
            own, context = [], set()
            for p in _parameters(self.factory):
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


_KINDS: dict[str, Kind] = {}
_REGISTRY: dict[str, dict[str, Entry]] = {}
_SPLITS: dict[tuple[int, int], tuple[list[Param], set[str]]] = {}
_entry_points_loaded = False


def declare_kind(name: str, *, key: str, interface: type, default: str, description: str) -> Kind:
    """Declare a kind of component: the one place its config key, interface and default are written.

    Args:
        name: the kind, e.g. ``"positional"``; also the context name under which a factory receives a
            built component of this kind.
        key: the dotted config key naming the variant (``model.positional``); ``<key>_args`` holds its
            parameters. The section (``model``, ``train``, ``data``) must exist in the schema.
        interface: the base class every variant must be (or return) an instance of.
        default: the variant used when a config does not name one (the paper's).
        description: one line for ``ablate components``.

    Returns:
        The kind. Declaring the same kind again with the same key and interface is a no-op.

    Raises:
        RegistrationError: the name or the key is taken by another kind.
    """
    kind = Kind(name, key, interface, default, description)
    if name in _KINDS:
        if (_KINDS[name].key, _KINDS[name].interface) != (key, interface):
            raise RegistrationError(f"kind {name!r} is already declared (config key {_KINDS[name].key})")
        return _KINDS[name]
    if any(k.key == key for k in _KINDS.values()) or name in CONTEXT:
        raise RegistrationError(f"kind {name!r}: the name or config key {key!r} is already in use")
    _KINDS[name] = kind
    _REGISTRY[name] = {}
    return kind


def _parameters(factory: Callable[..., Any]) -> list[Param]:
    """A factory's keyword parameters. A class whose ``__init__`` takes ``**kwargs`` and passes them on (a
    subclass of its kind's base) also takes those of the next ``__init__`` up its MRO."""
    targets = [factory]
    if inspect.isclass(factory):
        targets = [c.__init__ for c in factory.__mro__ if "__init__" in vars(c) and c is not object]
    params: dict[str, Param] = {}
    for target in targets:
        try:
            hints = inspect.get_annotations(target, eval_str=True)
        except Exception:  # unresolvable annotations: fall back to the raw ones
            hints = {}
        signature = inspect.signature(target)
        for p in signature.parameters.values():
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in params:
                params[p.name] = Param(p.name, hints.get(p.name, p.annotation), p.default)
        if not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
            break
    return list(params.values())


def _product(factory: Callable[..., Any]) -> type | None:
    """The class a factory makes: the class itself, or a function's return annotation (None if unknown)."""
    if inspect.isclass(factory):
        return factory
    try:
        returned = inspect.get_annotations(factory, eval_str=True).get("return")
    except Exception:
        return None
    return returned if inspect.isclass(returned) else None


def missing_members(cls: type, interface: type) -> list[str]:
    """The public members of ``interface`` that ``cls`` lacks, and the abstract ones it leaves unimplemented."""
    public = [m for m in dir(interface) if not m.startswith("_") and not hasattr(object, m)]
    lacking = [m for m in public if not hasattr(cls, m)]
    return sorted(set(lacking) | set(getattr(cls, "__abstractmethods__", ())))


def _check_interface(kind: Kind, name: str, factory: Any) -> None:
    product = _product(factory)
    if product is None:
        return  # an unannotated function: its product is checked when it is built (see create)
    if not issubclass(product, kind.interface) or inspect.isabstract(product):
        missing = missing_members(product, kind.interface) or ["a subclass of it"]
        raise RegistrationError(
            f"cannot register {kind.name} {name!r}: {product.__qualname__} does not implement "
            f"{kind.interface.__module__}.{kind.interface.__qualname__} (missing: {', '.join(missing)})")


def register(kind: str, name: str, description: str | None = None, *,
             reads: Iterable[str] = ()) -> Callable[[Any], Any]:
    """Register a component factory under ``kind`` and ``name``.

    Args:
        kind: a declared kind, e.g. ``"positional"``.
        name: the name configs use to select it, e.g. ``"learned"``.
        description: one line for ``ablate components``, with the paper it comes from; defaults to
            the first line of the factory's docstring.
        reads: config keys it reads besides those its context names (a task's ``data.*`` keys).

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
        doc = description or ((inspect.getdoc(factory) or "").strip().splitlines() or [""])[0]
        _REGISTRY[kind][name] = Entry(kind=kind, name=name, factory=factory, description=doc,
                                      module=getattr(factory, "__module__", "?"), extra_reads=tuple(reads))
        return factory

    return decorate


def load_plugins() -> None:
    """Import the components of installed packages (the ``ablate.components`` entry points), once."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()


def import_modules(modules: Iterable[str]) -> None:
    """Import user modules that register components (the ``imports`` key).

    The current directory is on the path, so ``imports: [my_components]`` finds ``./my_components.py``.

    Raises:
        ConfigError: a module cannot be imported, or it registers a component that is refused.
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError("imports", module, f"an importable module ({exc})") from exc
        except RegistrationError as exc:
            raise ConfigError("imports", module, f"a module whose components can be registered ({exc})") from exc
        except Exception as exc:  # its own code raised (a syntax error, a bug): one line, where and what
            where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
            raise ConfigError("imports", module, f"a module that imports cleanly ({where}{type(exc).__name__}: "
                              f"{' '.join(str(exc).split())})") from exc


def version() -> tuple[int, int]:
    """Changes whenever a kind is declared or a variant registered (a key for caches of what the registry holds)."""
    return len(_KINDS), sum(len(v) for v in _REGISTRY.values())


def kinds() -> dict[str, Kind]:
    """Every declared kind, by name, in declaration order."""
    load_plugins()
    return dict(_KINDS)


def kind(name: str) -> Kind:
    """One declared kind.

    Raises:
        ConfigError: no such kind (the message lists the kinds).
    """
    load_plugins()
    if name not in _KINDS:
        close = difflib.get_close_matches(str(name), list(_KINDS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError("kind", name, f"one of {', '.join(_KINDS)}{hint}")
    return _KINDS[name]


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
        if ann in (int, float, bool, str) and not _fits(value, ann):
            raise ConfigError(f"{key}.{arg}", value, f"a {ann.__name__}")
    for p in entry.params:
        if p.required and p.name not in args:
            raise ConfigError(f"{key}.{p.name}", "missing", f"a value: {kind_name} {name!r} requires it")


def _fits(value: Any, ann: type) -> bool:
    if ann is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, ann)


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
