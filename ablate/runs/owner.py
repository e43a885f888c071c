"""Which folders ablate may write: every folder it writes says what it is, and ablate writes only into a new folder or
one of the same kind and identity.

    <folder>/.ablate      {"kind": "run" | "sweep" | "report", "identity": {...}}   (JSON, written when it is claimed)

A run's identity is its config hash, declared in its ``result.json`` and ``config.yaml`` (:mod:`ablate.runs.files`;
:func:`ablate.train.preflight.check_run_dir` names the keys that differ); a sweep's is its name and what the overrides
it was launched with set (:func:`sweep_identity`: their order aside). A folder written by an ablate older than the
marker is known by its files (:data:`FILES`).

:func:`check_folder` is what every writer asks before its first write: it refuses, in one line naming the option and
the path, an existing file, the root, a folder of another kind (or holding files ablate did not write), a folder of
the same kind but another identity, and a path inside a run's folder. :func:`check_figure` is its counterpart for a
file ablate draws (``attention --out``): never one of a run's own files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ablate.errors import COMMAND_LINE, ConfigError
from ablate.runs.files import (CHECKPOINTS_DIR, CONFIG_FILE, PROGRESS_FILE, RESULT_FILE, STOP_FILE, being_written,
                               write_json)
from ablate.runs.plan import PLAN_FILE, read_plan
from ablate.runs.sweep_folder import REPORT_PAGE, TABLE_CSV

MARKER = ".ablate"
KINDS = ("run", "sweep", "report")
FILES = {  # what each kind of folder holds, for folders written before the marker (any one of them tells the kind)
    "run": (CONFIG_FILE, RESULT_FILE, CHECKPOINTS_DIR, PROGRESS_FILE, STOP_FILE),
    "sweep": (PLAN_FILE,),
    "report": (REPORT_PAGE, TABLE_CSV),
}
FIGURE_SUFFIX = ".png"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Owner:
    """What a folder says it is: ``kind`` (one of :data:`KINDS`), and ``identity`` (None when it does not say)."""

    kind: str
    identity: dict[str, Any] | None = None


def owner_of(folder: Path, *, strict: bool = False) -> Owner | None:
    """The kind and identity ``folder`` declares (its marker, else its files); None when it holds neither.
    ``strict``: a folder without a marker is a run only when it holds a ``result.json`` (every run writes one before
    it trains), so that a project folder that happens to hold a ``checkpoints/`` is not taken for a run.

    Raises:
        ConfigError: its marker is not one ablate writes.
    """
    folder = Path(folder)
    marker = folder / MARKER
    if marker.is_file() or marker.is_symlink() or marker.exists():
        try:
            data = json.loads(marker.read_text())
        except (OSError, UnicodeError, ValueError):
            data = None
        if not isinstance(data, dict) or data.get("kind") not in KINDS or not isinstance(data.get("identity"),
                                                                                         (dict, type(None))):
            raise ConfigError("file", str(marker), f"the marker ablate writes: JSON naming a kind ({', '.join(KINDS)}) "
                              "and an identity")
        return Owner(data["kind"], data["identity"])
    for kind, names in FILES.items():
        if any((folder / name).exists() for name in (names[1:2] if strict and kind == "run" else names)):
            return Owner(kind, _legacy_identity(folder) if kind == "sweep" else None)
    return None


def sweep_identity(name: str, overrides: Iterable[str]) -> dict[str, Any]:
    """A sweep folder's identity: the sweep's name and what its command-line overrides set, as one nested mapping, so
    that ``a=1 b=2`` and ``b=2 a=1`` (or ``a=0 a=1 b=2``: the last counts) are one sweep, and ``a=2`` another.
    Overrides that do not parse (refused later, by the planner, with their reason) are kept as given."""
    overrides = [str(o) for o in overrides]
    try:
        settings: Any = OmegaConf.to_container(OmegaConf.from_dotlist(overrides))
    except (OmegaConfBaseException, ValueError):
        settings = overrides
    return {"name": name, "overrides": settings}


# How a stored identity is compared with a new one: a sweep's marker written before sweep_identity held its overrides
# as the list given, in the order given.
_COMPARABLE = {"sweep": lambda identity: {**identity, **sweep_identity(identity.get("name"),
                                                                      identity.get("overrides") or [])}
               if isinstance(identity.get("overrides"), list) else identity}


def _legacy_identity(folder: Path) -> dict[str, Any] | None:
    """A sweep folder written before the marker: its name, as its plan.json holds it (None when it cannot say)."""
    try:
        record = read_plan(folder, complete=False)
    except ConfigError:  # not JSON, or not a plan: it cannot say
        return None
    return {"name": record.name} if record is not None and isinstance(record.name, str) and record.name else None


def _describe(owner: Owner | None) -> str:
    return f"a {owner.kind} folder" if owner else "a folder of files ablate did not write"


def _refuse(key: str, path: Path, why: str, source: str | None) -> ConfigError:
    return ConfigError(key, str(path), why, source)


def check_folder(path: Path, kind: str, identity: dict[str, Any] | None, *, key: str,
                 source: str | None = COMMAND_LINE) -> None:
    """Refuse ``path`` as a ``kind`` folder of ``identity`` before anything is written there (nothing is created).

    Args:
        path: the folder to write.
        kind: what will be written there, one of :data:`KINDS`.
        identity: what the folder belongs to; None leaves the comparison to the caller (a run's config hash).
        key, source: what names the path in an error (``output_dir``, ``--out``) and where it came from.

    Raises:
        ConfigError: the path is the root, a file, under a file, inside a run's folder, read-only, a folder of another
            kind or of files ablate did not write, or a folder of this kind that belongs to another identity.
    """
    path = Path(path)
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise _refuse(key, path, f"a folder ablate can create ({' '.join(str(exc).split())})", source) from None
    what = f"a new folder or a {kind} folder"
    if real == Path(real.anchor):
        raise _refuse(key, path, f"{what}, not the root of the file system", source)
    if path.exists() and not path.is_dir():
        raise _refuse(key, path, f"{what} (this is a file)", source)
    for parent in real.parents:
        if parent.exists() and not parent.is_dir():
            raise _refuse(key, path, f"{what} (its parent {parent} is a file)", source)
        if parent.is_dir() and (owner := owner_of(parent, strict=True)) is not None and owner.kind == "run":
            raise _refuse(key, path, f"{what}, not a folder inside the run folder {parent}", source)
    if path.is_dir() and not os.access(path, os.W_OK):
        raise _refuse(key, path, "a folder ablate can write in (this one is read-only)", source)
    if not path.is_dir() or all(being_written(path / MARKER, entry) for entry in path.iterdir()):
        return  # new, or a folder another launcher is claiming this instant (its marker half written by mark)
    owner = owner_of(path)
    if owner is None or owner.kind != kind:
        raise _refuse(key, path, f"{what} (this is {_describe(owner)}: ablate writes only into a new folder or one "
                      f"of the same kind)", source)
    stored = _COMPARABLE.get(kind, lambda i: i)(owner.identity or {})
    both = sorted(set(stored) & set(identity or {}))  # what both say (an older folder says less)
    differ = "; ".join(f"{k}: {stored[k]!r} -> {identity[k]!r}" for k in both if stored[k] != identity[k])
    if differ:
        raise _refuse(key, path, f"{what} of this {kind} (this one belongs to another {kind}: {differ}); give "
                      "another folder", source)


def claim(path: Path, kind: str, identity: dict[str, Any] | None, *, key: str,
          source: str | None = COMMAND_LINE) -> Path:
    """Check ``path`` (:func:`check_folder`), create it and its marker; returns ``path``.

    Raises:
        ConfigError: as :func:`check_folder`, or the folder cannot be created.
    """
    path = Path(path)
    check_folder(path, kind, identity, key=key, source=source)
    try:
        mark(path, kind, identity)
    except OSError as exc:
        raise _refuse(key, path, f"a folder ablate can create and write in ({exc.strerror})", source) from None
    return path


def mark(path: Path, kind: str, identity: dict[str, Any] | None) -> None:
    """Create ``path`` and say what it is (once: a folder keeps the identity it was first claimed with; one written
    before the marker gets it now). Call :func:`check_folder` first.

    Raises:
        OSError: the folder cannot be created or written in.
    """
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    if not marker.exists():
        write_json(marker, {"kind": kind, "identity": identity})


def check_figure(path: Path, *, key: str, source: str | None = COMMAND_LINE) -> None:
    """Refuse ``path`` as a figure ablate draws: it must end in .png, be new or a PNG already, and not lie in the
    root or inside a run's subfolders (a run's own folder is where its figures go by default).

    Raises:
        ConfigError: naming the path and why.
    """
    path = Path(path)
    what = f"a new {FIGURE_SUFFIX} file or a PNG ablate drew"
    if path.suffix.lower() != FIGURE_SUFFIX:
        raise _refuse(key, path, f"{what} (the name must end in {FIGURE_SUFFIX})", source)
    if path.exists() or path.is_symlink():
        if not path.is_file():
            raise _refuse(key, path, f"{what} (this is a folder)", source)
        with path.open("rb") as f:
            if f.read(len(PNG_MAGIC)) != PNG_MAGIC:
                raise _refuse(key, path, f"{what} (this file is not a PNG: ablate does not write over it)", source)
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:
        raise _refuse(key, path, f"{what} ({' '.join(str(exc).split())})", source) from None
    if real.parent == Path(real.anchor):
        raise _refuse(key, path, f"{what}, not in the root of the file system", source)
    for parent in real.parents:
        if parent.exists() and not parent.is_dir():
            raise _refuse(key, path, f"{what} (its parent {parent} is a file)", source)
        if parent != real.parent and parent.is_dir() and (owner := owner_of(parent, strict=True)) is not None \
                and owner.kind == "run":
            raise _refuse(key, path, f"{what}, not inside the run folder {parent}'s own files", source)
