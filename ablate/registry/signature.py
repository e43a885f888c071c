"""Reading a component factory's signature: its keyword parameters, what it makes, and what it lacks.

A class factory whose ``__init__`` takes ``**kwargs`` and passes them on (a subclass of its kind's base) also takes
the parameters of the next ``__init__`` up its MRO.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable


class RegistrationError(TypeError):
    """A factory that cannot be registered: unknown kind, name taken, or the kind's interface not implemented."""


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


def parameters_of(factory: Callable[..., Any]) -> list[Param]:
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


def product_of(factory: Callable[..., Any]) -> type | None:
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


def fits(value: Any, ann: type) -> bool:
    if ann is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, ann)
