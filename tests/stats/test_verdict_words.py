"""The verdict words have one owner, :mod:`ablate.stats.verdict`: every other module asks it (``name(WORSE)``,
``said(c.verdict, *DECIDED)``) rather than typing "worse", so a renamed or added verdict cannot leave a copy behind."""

from __future__ import annotations

import ast
from pathlib import Path

from ablate.stats import verdict as V

PACKAGE = Path(__file__).resolve().parents[2] / "ablate"
OWNER = PACKAGE / "stats" / "verdict.py"
EXCEPTIONS: dict[tuple[str, str], str] = {}  # (path under ablate/, word): why that copy must stay; none today


def typed_words(path: Path) -> list[tuple[int, str]]:
    """The string literals of ``path`` that are a verdict's word, whole (a docstring or a sentence using the word is
    prose, not a copy of the vocabulary)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in V.NAMES]


def test_no_module_but_verdict_py_types_a_verdict_word():
    found = [f"{path.relative_to(PACKAGE)}:{line}: {word!r}" for path in sorted(PACKAGE.rglob("*.py"))
             if path != OWNER for line, word in typed_words(path)
             if (str(path.relative_to(PACKAGE)), word) not in EXCEPTIONS]
    assert found == []


def test_the_check_sees_a_typed_word(tmp_path):
    module = tmp_path / "copy.py"
    module.write_text('DECIDED = ("better", "worse")\n"""A docstring saying better is prose."""\n')
    assert typed_words(module) == [(1, "better"), (1, "worse")]


def test_said_reads_a_verdict_word_against_its_codes():
    assert V.said("equivalent", *V.DECIDED) and not V.said("not worse", *V.DECIDED)
    assert V.said("worse", *V.SIGNED) and not V.said("equivalent", *V.SIGNED) and not V.said(None, V.UNDECIDED)
