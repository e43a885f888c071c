"""A name a sweep folder, a run's metrics or an exit code is known by is typed once, in its owner; every other module
asks the owner's constant, so a renamed file or metric cannot leave a copy behind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ablate import exits
from ablate.runs import metrics, plan, sweep_folder

PACKAGE = Path(__file__).resolve().parents[2] / "ablate"
OWNERS = {  # a value, typed whole as a literal, and the one module under ablate/ that may type it
    sweep_folder.SWEEP_FILE: "runs/sweep_folder.py", sweep_folder.ARRAYS_FILE: "runs/sweep_folder.py",
    sweep_folder.REPORT_PAGE: "runs/sweep_folder.py", sweep_folder.TABLE_CSV: "runs/sweep_folder.py",
    plan.PLAN_FILE: "runs/plan.py", metrics.VAL_LOSS: "runs/metrics.py", metrics.TOKENS_PER_S: "runs/metrics.py",
    exits.EXIT_INTERRUPTED: "exits.py", exits.EXIT_TERMINATED: "exits.py", exits.EXIT_PIPE: "exits.py",
}
EXCEPTIONS = {  # (path under ablate/, value): why that copy stays
    ("stats/design.py", plan.PLAN_FILE): "the source its errors name by default: stats sits below runs, which imports "
                                         "it, so it cannot ask runs.plan",
}


def typed(path: Path) -> list[tuple[int, object]]:
    """The literals of ``path`` that are one of :data:`OWNERS`' values, whole (prose that mentions one is not a copy);
    a bool is no exit code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and not isinstance(node.value, bool) and isinstance(node.value, (str, int)) and node.value in OWNERS]


def test_every_owned_name_is_typed_only_by_its_owner():
    found = [f"{path.relative_to(PACKAGE)}:{line}: {value!r}" for path in sorted(PACKAGE.rglob("*.py"))
             for line, value in typed(path) if OWNERS[value] != str(path.relative_to(PACKAGE))
             and (str(path.relative_to(PACKAGE)), value) not in EXCEPTIONS]
    assert found == []


@pytest.mark.parametrize("value", sorted(v for v in OWNERS if isinstance(v, str)))
def test_each_owner_types_its_name_once(value):
    assert [v for _, v in typed(PACKAGE / OWNERS[value]) if v == value] == [value]


def test_the_check_sees_a_copy(tmp_path):
    module = tmp_path / "copy.py"
    module.write_text('PAGE = "report.html"\nif code == 130:\n    pass\n"""report.html is prose"""\nok = True\n')
    assert typed(module) == [(1, "report.html"), (2, 130)]
