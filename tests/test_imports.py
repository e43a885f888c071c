"""The house only looks down: no import circle between ablate's modules, and no package importing one above it.

Imports inside functions count: a deferred import is still an arrow. An arrow up kept on purpose would be named in
ALLOWED with its reason; there is none.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ablate"

# Packages from the bottom up: a module may import its own package or any package on a lower line.
LAYERS = (
    ("errors",),
    ("yamlio", "runtime", "formats", "options", "exits", "registry", "stats", "paths"),
    ("components", "data"),
    ("config", "metrics"),
    ("model", "decode"),
    ("runs",),
    ("train", "evaluate", "report", "describe"),
    ("entry",),
    ("sweep",),
    ("cli",),
)
ALLOWED: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every ablate module ``path`` imports, at its top or inside a function (``from ablate import registry`` is
    ablate.registry)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ablate":
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                yield submodule if submodule in known else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "ablate")


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {t for t in imports(path, known) if t in known and t != name and (name, t) not in ALLOWED}
            for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_circle_but_the_named_one():
    assert circles(graph()) == []


def test_no_package_imports_one_above_it():
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    edges = graph()
    assert set(map(package, edges)) - {""} <= set(layer), "a new package: give it a line in LAYERS"
    upward = sorted(f"{m} -> {t}" for m, targets in edges.items() for t in targets
                    if package(m) and package(t) and package(m) != package(t)
                    and layer[package(t)] >= layer[package(m)])
    assert upward == []


@pytest.mark.parametrize("edges, expected", [({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
                                             ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
                                             ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]])])
def test_the_circle_finder_finds_circles(edges, expected):
    assert circles(edges) == expected
