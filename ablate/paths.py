"""Where a path written in a file is looked for: beside the file that names it, then in ablate's own shipped folder.

A study lives where the researcher keeps it, so a relative path means the same wherever the shell stands:

    study/mystudy.yaml       base: configs/default.yaml   -> study/configs/default.yaml, else <shipped>/configs/...
    study/configs/my.yaml    defaults: [base.yaml]        -> study/configs/base.yaml, else <shipped>/base.yaml
                             data.path: ../data/corpus    -> study/data/corpus, else <shipped>/../data/corpus
                             imports: [my_parts]          -> study/configs/my_parts.py (its folder on the import path)

A path given on the command line is looked for in the current folder, then the shipped folder; any other, last, in
the current folder too (where it alone was looked for before). The shipped folder
is the one holding ablate's ``configs/`` and ``experiments/``: the clone's root for a checkout or ``pip install -e .``,
else ``<sys.prefix>/share/ablate`` (where a wheel puts them: ``[tool.setuptools.data-files]``). A file that is in
none of these is one line naming the key, the value and every folder looked in.

A run records what its relative paths were found beside (``paths`` in its ``config.yaml``: the folders of its
``data.path`` and of its ``imports``, absolute), so the run processes of a sweep and a resume from any folder find
them again; ``paths`` is no part of the run's identity (:data:`ablate.runs.files.NOT_IDENTITY`): the paths in it
stay as written.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from ablate.errors import COMMAND_LINE, ConfigError

SHIPPED_FOLDERS = ("configs", "experiments")  # what marks ablate's shipped folder
INSTALLED = Path("share") / "ablate"  # under sys.prefix: where a wheel's data-files put them


@lru_cache(maxsize=1)
def shipped_root() -> Path | None:
    """The folder holding ablate's shipped ``configs/`` and ``experiments/``; None when neither place has them."""
    candidates = [Path(__file__).resolve().parents[1], Path(sys.prefix) / INSTALLED]
    return next((c for c in candidates if all((c / f).is_dir() for f in SHIPPED_FOLDERS)), None)


def folder_of(source: str | Path | None) -> Path | None:
    """The folder a relative path named by ``source`` starts from: a file's own folder, the current folder for the
    command line, None for anything else (the schema's defaults, ablate's bookkeeping)."""
    if source is None:
        return None
    if str(source) == COMMAND_LINE:
        return Path.cwd()
    return Path(source).parent if Path(source).is_file() else None


def search_path(folder: Path | None) -> list[Path]:
    """The folders a relative path is looked for in, in order, absolute: ``folder`` (the naming file's), then the
    shipped folder, then the current folder, last (where such a path was looked for alone before: a W&B agent's
    copy of a sweep file, written into the sweep's folder, still finds what it found)."""
    out = [Path(os.path.abspath(folder))] if folder is not None else []
    for extra in (shipped_root(), Path.cwd()):
        if extra is not None and extra not in out:
            out.append(extra)
    return out


def looked_in(folders: Iterable[Path]) -> str:
    """``looked in A, B``: the words every "not found" message ends with."""
    return f"looked in {', '.join(map(str, folders)) or 'no folder'}"


def find(value: str | Path, folder: Path | None, exists: Callable[[Path], bool] = Path.is_file) -> Path | None:
    """Where ``value`` is: itself when absolute (or ``~``), else the first of :func:`search_path` holding it (relative
    to the current folder when it is inside it, so that messages stay short); None when nowhere."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path if exists(path) else None
    for base in search_path(folder):
        if exists(base / path):
            return _short(base / path)
    return None


def find_file(value: str | Path, folder: Path | None, *, key: str, source: str, what: str = "an existing YAML file",
              exists: Callable[[Path], bool] = Path.is_file) -> Path:
    """:func:`find`, or one line naming ``key``, the value and the folders looked in.

    Raises:
        ConfigError: the path is in none of the folders.
    """
    found = find(value, folder, exists)
    if found is None:
        absolute = Path(value).expanduser().is_absolute()
        where = "an absolute path: looked there alone" if absolute else looked_in(search_path(folder))
        raise ConfigError(key, str(value), f"{what} ({where})", source)
    return found


def data_folders(value: str | None, folder: Path | None) -> list[str]:
    """The folders a relative ``data.path`` is looked for in (absolute), as the run records them; [] for an absolute
    path or none."""
    if not value or Path(str(value)).expanduser().is_absolute():
        return []
    return [str(f) for f in search_path(folder)]


def locate_data(value: str, folders: Iterable[str]) -> str:
    """``data.path`` where it is: the first recorded folder holding it, else the path as written (a Hub dataset's
    name, or a path relative to the current folder, as a run recorded before ``paths`` reads it)."""
    path = Path(str(value)).expanduser()
    if not path.is_absolute():
        for base in folders:
            if (Path(base) / path).exists():
                return str(Path(base) / path)
    return str(value)


def _short(path: Path) -> Path:
    """``path`` relative to the current folder when it is inside it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd())
    except ValueError:
        return absolute
