"""A launch reads plan.json once, through its one reader (:func:`ablate.runs.plan.read_plan`), before anything writes
it, and passes the record down to every check and queue that asks what an earlier launch planned: counted on a real
tiny launch and its relaunch, by the reader's calls and, independently, by every read of a file named plan.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.runs import plan as plan_file
from ablate.sweep import load_sweep
from ablate.sweep import plan as sweep_plan
from ablate.sweep import launch as launching
from ablate.sweep.launch import launch
from tests.sweep.conftest import run_attempts, sweep_file


@pytest.fixture
def reads(monkeypatch):
    """Counts: ``calls`` to the one reader, ``opened`` reads of any file named plan.json in this process."""
    counted = {"calls": 0, "opened": 0}
    reader, read_text = plan_file.read_plan, Path.read_text

    def counting_reader(*args, **kwargs):
        counted["calls"] += 1
        return reader(*args, **kwargs)

    def counting_read_text(self, *args, **kwargs):
        if self.name == plan_file.PLAN_FILE:
            counted["opened"] += 1
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(plan_file, "read_plan", counting_reader)
    monkeypatch.setattr(sweep_plan, "read_plan", counting_reader)
    monkeypatch.setattr(Path, "read_text", counting_read_text)
    return counted


def _launch(path: Path, sweep_dir: Path, **kw):
    return launch(load_sweep(path), extra=[], sweep_dir=sweep_dir, workers=1, retry_failed=False, progress=False,
                  **{"dry_run": False, **kw})


def test_a_launch_and_its_relaunch_each_read_the_plan_once(tmp_path, reads):
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: pre, model.norm_position: pre}
    """)
    sweep_dir = tmp_path / "sweeps" / "t"
    _, runs, outcome = _launch(path, sweep_dir)
    assert len(outcome.done) == len(runs) == 2 and not outcome.failed
    assert reads == {"calls": 1, "opened": 0}  # a new sweep: asked once, no file to read yet

    reads.update(calls=0, opened=0)
    _, again, outcome = _launch(path, sweep_dir)  # nothing left to do: every run ended
    assert reads == {"calls": 1, "opened": 1}
    assert run_attempts(sweep_dir) == [1, 1] and [r.id for r in again] == [r.id for r in runs]  # reads it: after

    reads.update(calls=0, opened=0)
    _launch(path, sweep_dir, dry_run=True, notes=[])  # a dry run's notes read the earlier runs too
    assert reads == {"calls": 1, "opened": 1}


def test_a_sequential_relaunch_reads_the_plan_once(tmp_path, reads, monkeypatch):
    """A sequential design's queue keeps the earlier launch's ended runs (``SequentialQueue(earlier=...)``): given,
    not read again. The folder is claimed and its plan written as a launch writes them; the relaunch stops once its
    queue is built (every read of a launch comes before its queue hands out a run)."""
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: pre, model.norm_position: pre}
    """)
    path.write_text(path.read_text() + "parameters:\n  seed: {values: [0, 1]}\ndecide: {margin: 0.1, max_seeds: 3}\n")
    sweep_dir = tmp_path / "sweeps" / "t"
    sweep = load_sweep(path)
    launching._claim(sweep, sweep_dir, [], write=True)
    sweep_plan.write_plan(sweep, sweep_dir, sweep_plan.Planner(sweep).plan(sweep.points()))
    reads.update(calls=0, opened=0)
    built, original = [], launching.open_queue

    def open_only(*args, **kwargs):
        built.append(original(*args, **kwargs)[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(launching, "open_queue", open_only)
    with pytest.raises(KeyboardInterrupt):
        _launch(path, sweep_dir)
    assert type(built[0]).__name__ == "SequentialQueue" and len(built[0].runs) == 4
    assert reads == {"calls": 1, "opened": 1}
