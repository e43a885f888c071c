"""Every change of a verdict after its interval is one named rule of :mod:`ablate.stats.verdict`: each rule checked on
its own (brute force over tiny cases, and through the code that applies it, so that dropping the call fails), and no
module but verdict.py assigns a verdict word."""

from __future__ import annotations

import ast
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ablate.report import build_report
from ablate.report.cells import verdict_text
from ablate.stats import verdict as V
from ablate.stats.design import MINIMIZE, Design
from ablate.stats.judge import judge_paired, judge_unpaired
from tests.report.test_verdicts import make

PACKAGE = Path(__file__).resolve().parents[2] / "ablate"
OWNER = PACKAGE / "stats" / "verdict.py"
CODES = {"BETTER", "WORSE", "EQUIVALENT", "NOT_WORSE", "NOT_BETTER", "UNDECIDED", "CANNOT_TEST", "TOO_FEW"}
WORDS = {"LEAKS", "GROWS", "SHRINKS", "FLIPS", "CONSISTENT", "DEPENDS", "NO_INTERACTION"}  # the rules' own words
READERS = {"said", "isin", "qualifier"}  # calls that read a verdict against codes, never make one
TYPED = {V.LEAKS, V.NOT_COMPARABLE, V.GROWS, V.SHRINKS, V.FLIPS, V.DEPENDS}  # the rules' words, typed out
HOLDERS = {"replace", "Comparison"}  # the calls whose ``verdict=`` is a verdict's word (a Column's is its place)


# --- untested ---------------------------------------------------------------------------------------------------

def test_untested_is_too_few_below_two_values_a_side_and_cannot_test_above():
    for n, m, lo in itertools.product(range(4), range(4), (math.nan, -1.0)):
        got = int(V.untested(np.array([V.BETTER]), np.array([lo]), np.array([n]), np.array([m]))[0])
        expected = V.BETTER if not math.isnan(lo) else (V.TOO_FEW if min(n, m) < 2 else V.CANNOT_TEST)
        assert got == expected, (n, m, lo)


def test_a_paired_row_whose_seeds_all_moved_alike_cannot_be_tested():
    """Three pairs, each 0.1 apart: no spread, no interval; without the rule the verdict would be *undecided*."""
    j = judge_paired(np.array([[2.1, 2.2, 2.3]]), np.array([[2.0, 2.1, 2.2]]), Design(), MINIMIZE)
    assert V.name(j.verdict[0]) == "cannot test"


def test_a_row_with_one_value_has_too_few_seeds():
    j = judge_unpaired(np.array([[2.1, math.nan]]), np.array([[2.0, 2.1, 2.2]]), Design(), MINIMIZE)
    assert not j.on_failures[0] and V.name(j.verdict[0]) == "too few seeds"


# --- on_failures ------------------------------------------------------------------------------------------------

def test_on_failures_overrides_only_where_the_test_rejects():
    for code, rejected, row_more in itertools.product(range(len(V.NAMES)), (False, True), (False, True)):
        got = int(V.on_failures(np.array([code]), np.array([rejected]), np.array([row_more]))[0])
        assert got == (code if not rejected else V.WORSE if row_more else V.BETTER)


def test_a_row_that_fails_far_more_often_is_worse_though_its_survivors_look_better():
    """12 of 20 failed against none of the base's 20: Fisher's p ~ 1e-5. Its survivors are lower (better) than the
    base; the guard alone says *undecided* (the row's good side withheld), the failure rule *worse*."""
    rng = np.random.default_rng(0)
    row = np.concatenate([1.0 + 0.01 * rng.standard_normal(8), np.full(12, np.nan)])[None]
    base = 2.0 + 0.01 * rng.standard_normal(20)[None]
    j = judge_unpaired(row, base, Design(), MINIMIZE)
    assert j.on_failures[0] and V.name(j.verdict[0]) == "worse"
    guarded = V.guard(j.lo, j.hi, MINIMIZE, j.margin, j.row_failed, j.runs, j.base_failed, j.base_runs)
    assert V.name(guarded[0]) == "undecided"  # the case bites: the guard alone would not say worse


# --- no_common_step ---------------------------------------------------------------------------------------------

def test_no_common_step_cannot_test():
    assert V.no_common_step() == V.NAMES[V.CANNOT_TEST]


def test_stopped_runs_without_a_common_step_are_not_judged_on_their_survivors(tmp_path):
    """The row's three runs logged nothing and one was stopped: no step to compare at, whatever the finals say."""
    values = {"base": [(s, 2.0 + 0.1 * s) for s in range(3)], "row": [(s, 1.0 + 0.1 * s) for s in range(3)]}
    make(tmp_path, values)
    (tmp_path / "runs" / "row-0-0" / "result.json").write_text(json.dumps({"status": "stopped", "step": 0}))
    c = next(r for r in build_report(tmp_path).variants if r.name == "row").comparison
    assert c.verdict == "cannot test" and "share no logged step" in c.reason


# --- leaking ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("verdict", [*V.NAMES, None])
def test_leaking_replaces_any_verdict_and_only_when_the_mask_leaks(verdict):
    assert V.leaking(verdict, True) == V.LEAKS and V.leaking(verdict, False) == verdict


def test_a_row_whose_mask_leaks_labels_is_not_comparable_however_clear_its_interval(tmp_path):
    values = {"base": [(s, 2.0 + 0.01 * s) for s in range(4)], "leaky": [(s, 1.0 + 0.02 * s) for s in range(4)]}
    report = build_report(make(tmp_path, values, leaks=("leaky",)))
    row = next(r for r in report.variants if r.name == "leaky")
    assert row.comparison.verdict == V.LEAKS and row.comparison.interval is None
    assert verdict_text(report, row) == V.LEAKS


# --- interaction ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", range(len(V.NAMES)))
def test_interaction_reads_signed_as_depends_and_equivalent_as_none_beyond_the_margin(code):
    got = V.interaction(V.NAMES[code], "0.1", "worse, by less than the margin")
    expected = {V.BETTER: V.DEPENDS, V.WORSE: V.DEPENDS,
                V.EQUIVALENT: "no interaction beyond ±0.1; a small one: worse, by less than the margin"}.get(code)
    assert got == expected
    assert V.interaction(V.NAMES[V.EQUIVALENT], "0.1") == "no interaction beyond ±0.1"


# --- trend ------------------------------------------------------------------------------------------------------

def _trend_by_hand(slope, diff, steps, mean):
    signs = {s for s in steps if s in ("better", "worse")}
    if signs == {"better", "worse"}:
        return "flips sign"
    if slope is not None and (slope[0] > 0 or slope[1] < 0):
        return "grows" if mean is not None and (diff > 0) == (mean > 0) else "shrinks"
    if steps and len(set(steps)) == 1 and steps[0] in ("better", "worse", "equivalent"):
        return f"consistent: {steps[0]} at every size"
    return "undecided"


def test_trend_on_every_tiny_ladder():
    words = [*V.NAMES, None]
    slopes = [None, (-2.0, -1.0), (-1.0, 1.0), (1.0, 2.0)]
    for k in (1, 2):
        for steps, slope, mean in itertools.product(itertools.product(words, repeat=k), slopes, (None, -0.5, 0.5)):
            diff = None if slope is None else sum(slope) / 2
            assert V.trend(slope, diff, steps, mean) == _trend_by_hand(slope, diff, steps, mean), (steps, slope, mean)


# --- one owner --------------------------------------------------------------------------------------------------

def _verdict_names(tree: ast.Module) -> set[str]:
    """The names this module binds to ablate.stats.verdict (``V``) or imports from it (``said``, ``WORSE``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "ablate.stats.verdict":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "ablate.stats":
            names |= {a.asname or a.name for a in node.names if a.name == "verdict"}
    return names


def assignments(path: Path) -> list[str]:
    """Where ``path`` makes a verdict rather than reads one: a ``verdict=`` argument that is not the result of a
    verdict.py function, or a verdict code or rule word of verdict.py used other than to read a verdict (compared,
    given to ``said``/``isin``, or looked up in a table keyed by the words, as the colours are)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mine = _verdict_names(tree)
    module = {n for n in mine if n == "V" or n == "verdict"}
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def constant(node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module:
            return node.attr if node.attr in CODES | WORDS else None
        if isinstance(node, ast.Name) and node.id in mine and node.id in CODES | WORDS:
            return node.id
        return None

    def reads(node: ast.AST) -> bool:
        parent = parents.get(node)
        while isinstance(parent, (ast.Starred, ast.Tuple, ast.List, ast.Set)):
            node, parent = parent, parents.get(parent)
        if isinstance(parent, ast.Compare):
            return True
        if isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in READERS:
                return True
            if called == "name":  # name(EQUIVALENT) as a key of a table of colours
                return keyed(parent)
        if isinstance(parent, ast.Subscript) and node is parent.slice:
            return keyed(parent)
        return False

    def keyed(node: ast.AST) -> bool:
        parent = parents.get(node)
        if isinstance(parent, ast.Dict) and node in parent.keys:
            return True
        return isinstance(parent, ast.Subscript) and node is parent.slice

    def holder(call: ast.AST) -> bool:
        func = getattr(call, "func", None)
        return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in HOLDERS

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in TYPED:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
        if (word := constant(node)) and not reads(node):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {word}")
        if isinstance(node, ast.keyword) and node.arg == "verdict" and holder(parents.get(node)):
            value = node.value
            made_by_owner = isinstance(value, ast.Call) and (
                (isinstance(value.func, ast.Attribute) and getattr(value.func.value, "id", "") in module)
                or (isinstance(value.func, ast.Name) and value.func.id in mine))
            if not made_by_owner:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: verdict={ast.unparse(value)}")
            elif any(constant(a) for a in value.args):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: verdict={ast.unparse(value)}")
    return found


def test_no_module_but_verdict_py_assigns_a_verdict():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if path != OWNER for hit in assignments(path)]
    assert found == []


@pytest.mark.parametrize("source,hits", [
    ("from ablate.stats import verdict as V\nx = replace(c, verdict=V.name(V.CANNOT_TEST))\n", 2),
    ("from ablate.stats import verdict as V\ncodes = np.where(bad, V.WORSE, codes)\n", 1),
    ("from ablate.stats.verdict import LEAKS\ndef f(row):\n    return LEAKS if row.leaks else 'x'\n", 1),
    ("x = replace(c, verdict='not comparable')\n", 2),
    ("def f(slope):\n    return 'grows' if slope else 'flips sign'\n", 2),
    ("from ablate.stats import verdict as V\nok = V.said(v, *V.DECIDED, V.WORSE) or code == V.TOO_FEW\n", 0),
    ("from ablate.stats.verdict import NAMES, BETTER\nPALETTE = {NAMES[BETTER]: 'green'}\n", 0),
    ("from ablate.stats import verdict as V\nc = Comparison(verdict=V.name(code))\n", 0),
])
def test_the_check_sees_a_verdict_made_outside_its_owner(tmp_path, monkeypatch, source, hits):
    module = tmp_path / "copy.py"
    module.write_text(source)
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", tmp_path)
    assert len(assignments(module)) == hits
