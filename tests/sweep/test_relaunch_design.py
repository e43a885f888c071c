"""The family is the design: a relaunch of a launched sweep that adds or removes a row, or that changes the configs
its finished runs were trained with (a run's id is its config's hash), is refused in one line, exit 2, nothing
written, unless ``--change-design``; with it, the report judges every row at the new family size.

Each test relaunches a copy of one tiny sweep whose first launch trained two runs (base and wide, one seed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ablate.report import build_report
from tests.sweep.conftest import ablate_here, plan_of, run_attempts, sweep_file

ROWS = """
    - {name: base}
    - {name: wide, model.d_ff: 96}
"""
NARROW = "- {name: narrow, model.d_ff: 48}"


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> Path:
    """A folder holding the sweep file and its sweep, trained: two runs, finished."""
    tmp = tmp_path_factory.mktemp("launched")
    path = sweep_file(tmp, ROWS)
    done = ablate_here("sweep", str(path), cwd=tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    assert run_attempts(tmp / "sweeps" / "t") == [1, 1]
    return tmp


@pytest.fixture
def copy(launched, tmp_path) -> Path:
    """The launched sweep, copied: each test changes its own."""
    shutil.copytree(launched, tmp_path, dirs_exist_ok=True)
    return tmp_path


def _files(tmp: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (tmp / "sweeps").rglob("*") if p.is_file()}


def _refused(tmp: Path, *extra: str) -> str:
    """Relaunch, with and without --dry-run: exit 2, one line on stderr, nothing written; returns the line."""
    before, lines = _files(tmp), set()
    for dry in ([], ["--dry-run"]):
        out = ablate_here("sweep", str(tmp / "sweep.yaml"), *extra, *dry, cwd=tmp)
        assert out.returncode == 2, out.stderr[-2000:]
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        lines.add(out.stderr.strip())
    assert _files(tmp) == before
    assert len(lines) == 1
    return lines.pop()


def _edit(tmp: Path, old: str, new: str) -> None:
    path = tmp / "sweep.yaml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


def _add_narrow(tmp: Path) -> None:
    _edit(tmp, "- {name: wide, model.d_ff: 96}", "- {name: wide, model.d_ff: 96}\n  " + NARROW)


def test_a_relaunch_that_adds_a_row_is_refused_naming_it(copy):
    _add_narrow(copy)
    line = _refused(copy)
    assert "rows='added narrow vs base'" in line and "(1 comparison sharing the 5% error)" in line
    assert "--change-design re-judges every row at the new family size, 2" in line and "--out" in line


def test_a_relaunch_that_removes_a_row_is_refused_naming_it(copy):
    _edit(copy, "- {name: wide, model.d_ff: 96}", "")
    line = _refused(copy)
    assert "rows='removed wide vs base'" in line and "new family size, 0" in line


def test_with_change_design_an_added_row_is_judged_at_the_new_family_size(copy):
    sweep_dir = copy / "sweeps" / "t"
    assert build_report(sweep_dir).design.rows == 1
    _add_narrow(copy)
    out = ablate_here("sweep", str(copy / "sweep.yaml"), "--change-design", cwd=copy)
    assert out.returncode == 0, out.stderr[-2000:]
    report = build_report(sweep_dir)
    assert report.design.rows == 2 and [r.name for r in report.variants] == ["base", "wide", "narrow"]
    assert plan_of(sweep_dir)["design"]["family"] == ["wide vs base", "narrow vs base"]
    assert run_attempts(sweep_dir) == [1, 1, 1]  # the new row's run alone trained
    again = ablate_here("sweep", str(copy / "sweep.yaml"), cwd=copy)  # the new family is the design now
    assert again.returncode == 0 and "nothing left to train" in again.stderr, again.stderr[-2000:]


def test_a_changed_base_override_that_would_retrain_the_finished_runs_is_refused_naming_it(copy):
    _edit(copy, "train.max_steps=8", "train.max_steps=10")
    line = _refused(copy)
    assert "base='train.max_steps: 8 -> 10'" in line and "2 runs that ended (of base, wide) would train again" in line
    assert "--change-design" in line and "--out" in line
    out = ablate_here("sweep", str(copy / "sweep.yaml"), "--change-design", cwd=copy)
    assert out.returncode == 0, out.stderr[-2000:]
    assert run_attempts(copy / "sweeps" / "t") == [1, 1] and len(list((copy / "sweeps" / "t" / "runs").iterdir())) == 4


def test_a_changed_row_value_is_refused_naming_the_row_and_its_values(copy):
    _edit(copy, "model.d_ff: 96", "model.d_ff: 80")
    line = _refused(copy)
    assert "rows='wide: model.d_ff=96 -> model.d_ff=80'" in line and "1 run that ended (of wide)" in line
