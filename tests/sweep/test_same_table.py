"""The same sweep, the same table: a sequential sweep run with one worker, with two (whose idle worker starts seeds
ahead of the looks), and killed at a look and relaunched, writes one report/table.csv, byte for byte, but for the
columns that say how its workers were timed (:func:`ablate.report.columns.timed_names`: throughput, wall time, the
runs started ahead)."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
from pathlib import Path

import pytest

from ablate.report import build_report
from ablate.report.columns import timed_names
from tests.sweep.conftest import DECIDING_ROWS, ablate_cli, ablate_here, sweep_file

pytestmark = pytest.mark.slow

# No margin: the stalled row is decided worse at once, the dropout row (a small, steady Δ) is not at its first look,
# so later looks add seeds to it and the base, and two workers start seeds ahead of them
SEQUENTIAL = """
parameters:
  seed: {values: [0, 1, 2]}
decide: {max_seeds: 5}
"""
ONE_THREAD = "trainer.threads=1"  # every run the same arithmetic, whatever the workers (not part of a run's identity)


def _sweep(tmp: Path) -> Path:
    path = sweep_file(tmp, DECIDING_ROWS, name="same")
    path.write_text(path.read_text() + SEQUENTIAL)
    return path


def _launched(tmp: Path, workers: int) -> Path:
    done = ablate_here("sweep", str(_sweep(tmp)), ONE_THREAD, "--workers", str(workers), cwd=tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp / "sweeps" / "same"


def _finished(sweep_dir: Path, run: dict) -> bool:
    result = sweep_dir / run["run_dir"] / "result.json"
    return result.is_file() and json.loads(result.read_text())["status"] == "finished"


def _killed_at_a_look(tmp: Path) -> Path:
    """Launched with two workers and SIGKILLed once the first run of the second look (seed 3) has finished, its
    partner still training and a seed ahead of it likely started in the idle worker, then relaunched. The pool says
    so in a line per run that ends (off a terminal): each line is an event to read the runs' result.json on, no
    clock."""
    path, sweep_dir = _sweep(tmp), tmp / "sweeps" / "same"
    proc = ablate_cli("sweep", str(path), ONE_THREAD, "--workers", "2", cwd=tmp, background=True)
    for _ in proc.stderr:  # the start note (after plan.json), then a line per run that ends
        runs = json.loads((sweep_dir / "plan.json").read_text())["runs"] if (sweep_dir / "plan.json").is_file() else []
        if any(r["seed"] == 3 and _finished(sweep_dir, r) for r in runs):
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep ended at its first look: no look to kill it at"
    again = ablate_cli("sweep", str(path), ONE_THREAD, "--workers", "2", cwd=tmp)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "ended in earlier launches" in again.stderr  # a relaunch, not a fresh start
    return sweep_dir


def _table(sweep_dir: Path) -> tuple[list[str], list[list[str]]]:
    """report/table.csv, as written, without the columns that depend on the workers' timing."""
    timed = set(timed_names(build_report(sweep_dir)))
    header, *rows = list(csv.reader(io.StringIO((sweep_dir / "report" / "table.csv").read_text(), newline="")))
    keep = [i for i, name in enumerate(header) if name not in timed]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


def test_one_worker_two_workers_and_a_killed_relaunched_sweep_write_the_same_table(tmp_path):
    tables = {}
    for name, make in (("one worker", lambda tmp: _launched(tmp, 1)), ("two workers", lambda tmp: _launched(tmp, 2)),
                       ("killed and relaunched", _killed_at_a_look)):
        (tmp_path / name).mkdir()
        tables[name] = _table(make(tmp_path / name))
    header, rows = tables["one worker"]
    assert {"tokens_per_s_mean", "wall_time_s_mean", "ahead_not_read"} <= set(timed_names(build_report(
        tmp_path / "one worker" / "sweeps" / "same"))) and "val/loss_mean" in header and "runs" in header
    assert tables["two workers"] == (header, rows)
    assert tables["killed and relaunched"] == (header, rows)
