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
this package imports neither. Modules: ``kinds`` (declared kinds, the context), ``variants`` (registered factories,
lookup, builds), ``signature`` (reading a factory's parameters), ``plugins`` (entry points, a config's imports).
"""



from ablate.registry.kinds import _KINDS, _REGISTRY, CONTEXT, Kind, declare_kind, kind, kinds  # noqa: F401
from ablate.registry.plugins import ENTRY_POINT_GROUP, import_modules, load_plugins  # noqa: F401
from ablate.registry.signature import Param, RegistrationError, missing_members  # noqa: F401
from ablate.registry.variants import (  # noqa: F401
    Entry,
    check_args,
    create,
    entries,
    get,
    names,
    register,
    unregister,
    version,
)
