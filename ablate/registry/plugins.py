"""User components from outside this package: installed packages' entry points, and modules a config imports."""

from __future__ import annotations

import importlib
import os
import sys
from importlib.metadata import entry_points
from typing import Iterable

from ablate.errors import ConfigError
from ablate.registry.signature import RegistrationError

ENTRY_POINT_GROUP = "ablate.components"
_entry_points_loaded = False


def load_plugins() -> None:
    """Import the components of installed packages (the ``ablate.components`` entry points), once."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()


def import_modules(modules: Iterable[str], folders: Iterable[str | os.PathLike] = ()) -> None:
    """Import user modules that register components (the ``imports`` key).

    The current directory is on the path, and so are ``folders`` (those of the files that name the modules, after
    what is there: a user's module never shadows an installed one), so ``imports: [my_components]`` finds
    ``my_components.py`` beside the file that names it (:mod:`ablate.paths`).

    Raises:
        ConfigError: a module cannot be imported (naming the folders looked in), or it registers a component that is
            refused.
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    folders = list(dict.fromkeys(str(f) for f in folders))
    sys.path.extend(f for f in folders if f not in sys.path)
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            where = ", ".join(dict.fromkeys([os.getcwd(), *folders]))
            raise ConfigError("imports", module, f"an importable module ({exc}; looked in {where} and the "
                              "installed packages)") from exc
        except RegistrationError as exc:
            raise ConfigError("imports", module, f"a module whose components can be registered ({exc})") from exc
        except SystemExit as exc:  # sys.exit() at import: the command would end there, with its code, doing nothing
            raise ConfigError("imports", module, f"a module that imports without exiting (it called sys.exit("
                              f"{exc.code!r}))") from None
        except Exception as exc:  # its own code raised (a syntax error, a bug): one line, where and what
            where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
            raise ConfigError("imports", module, f"a module that imports cleanly ({where}{type(exc).__name__}: "
                              f"{' '.join(str(exc).split())})") from exc
