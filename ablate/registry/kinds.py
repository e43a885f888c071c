"""Kinds of component, each declared once: its config key, the interface its variants implement, its default, and
what the assembler can pass to a factory (:data:`CONTEXT`)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ablate.errors import ConfigError
from ablate.registry.plugins import load_plugins
from ablate.registry.signature import RegistrationError

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
    "layer": None,  # the index (from 0) of the layer it is built for, in its stack
    "cross": None,  # attention: True for the decoder's attention over the encoder output
    "decoder_only": None,  # True for a decoder-only language model
}


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


_KINDS: dict[str, Kind] = {}
_REGISTRY: dict[str, dict] = {}  # kind -> name -> Entry (see ablate.registry.variants)


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
