"""A killed seed array resumes as the same array: its grouping is recorded at the first launch, a relaunch (with
other ``--workers``) trains the same arrays from their own checkpoints, and every member ends with the values, the
per-step history and the result fields of the uninterrupted sweep; the dry run says the arrays the sweep trains."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ablate.runs.files import read_json, read_metrics, read_result
from ablate.sweep.arrays import ARRAYS_FILE
from tests.sweep.conftest import ablate_here, plan_of, sweep_file

pytestmark = pytest.mark.slow

# max_steps a multiple of log_every: the case that logged a last train/loss of 0.0 over an empty window
# one thread a run whatever --workers says, so that a relaunch with other workers sums in the same order
STEPS = ["train.max_steps=20", "train.val_every=5", "train.log_every=5", "trainer.threads=1"]
SAME = ("status", "step", "final", "best", "config_hash", "train_tokens")


def _sweep(tmp: Path) -> Path:
    path = sweep_file(tmp, """
        - {name: base}
        - {name: wide, model.d_ff: 96}
    """)
    path.write_text(path.read_text().replace("logger=none]", "logger=none, " + ", ".join(STEPS) + "]")
                    + "parameters:\n  seed: {values: [0, 1, 2]}\n")
    return path


def _record(sweep_dir: Path) -> dict[str, dict]:
    """Per run: its result's fields that must not depend on a kill, its validation history and its logged rows."""
    out = {}
    for run in plan_of(sweep_dir)["runs"]:
        run_dir = sweep_dir / run["run_dir"]
        result = read_result(run_dir)
        rows = [{k: v for k, v in r.items() if "tokens_per_s" not in k} for r in read_metrics(run_dir)]
        result["final"] = {k: v for k, v in result["final"].items() if "tokens_per_s" not in k}  # a time
        out[run["id"]] = {**{k: result.get(k) for k in SAME}, "members": result["fused"]["members"],
                          "index": result["fused"]["index"], "rows": rows,
                          "history": read_json(run_dir / "progress.json")["history"]}
    return out


def _wait_unlocked(sweep_dir: Path) -> None:
    """Block until no process holds a run's lock (the killed sweep's children are gone)."""
    for lock in sweep_dir.glob("runs/*/.lock"):
        fd = os.open(lock, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.close(fd)


def _kill_when(sweep_dir: Path, proc: subprocess.Popen, reached) -> None:
    """SIGKILL the sweep's whole process group once ``reached()`` holds (polled: an event, not a time)."""
    deadline = time.monotonic() + 600
    while not reached() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before the kill point"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _wait_unlocked(sweep_dir)


def _member_at(sweep_dir: Path, step: int) -> bool:
    for path in sweep_dir.glob("runs/*/progress.json"):
        try:
            if json.loads(path.read_text())["step"] >= step:
                return True
        except (ValueError, KeyError):
            continue
    return False


def test_a_killed_array_relaunched_with_other_workers_ends_as_the_uninterrupted_sweep(tmp_path):
    path = _sweep(tmp_path)
    whole = ablate_here("sweep", str(path), "--fuse", "on", "--workers", "1", "--out", "whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    expected = _record(tmp_path / "whole")

    sweep_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(path), "--fuse", "on", "--workers", "1", "--out", "killed"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_when(sweep_dir, proc, lambda: _member_at(sweep_dir, 10))
    killed = [read_result(sweep_dir / r["run_dir"]) or {} for r in plan_of(sweep_dir)["runs"]]
    assert any(r.get("status") != "finished" for r in killed)

    again = ablate_here("sweep", str(path), "--fuse", "on", "--workers", "3", "--out", "killed", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    got = _record(sweep_dir)
    assert got.keys() == expected.keys()
    for run_id, fields in expected.items():
        for name, value in fields.items():
            assert got[run_id][name] == value, (run_id, name)
    assert all(r["final"]["train/loss"] > 0 for r in got.values())  # not a log over an empty window
    assert not [p for p in sweep_dir.rglob("*.tmp")], "temporary files left behind"


def test_the_dry_run_says_the_arrays_the_sweep_trains(tmp_path, monkeypatch):
    """Five seeds of two variants, two workers: the dry run's arrays are the ones recorded and trained."""
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: wide, model.d_ff: 96}
    """)
    path.write_text(path.read_text() + "parameters:\n  seed: {values: [0, 1, 2, 3, 4]}\n")
    dry = ablate_here("sweep", str(path), "--fuse", "3", "--workers", "2", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-2000:]
    lines = dry.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("how seeds train")) + 1
    said = [line.strip() for line in lines[start:]]
    ran = ablate_here("sweep", str(path), "--fuse", "3", "--workers", "2", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    sweep_dir = tmp_path / "sweeps" / "t"
    sizes: dict[str, dict[str, int]] = {}
    for run in plan_of(sweep_dir)["runs"]:
        fused = read_result(sweep_dir / run["run_dir"]).get("fused")
        key = fused["array"] if fused else run["id"]
        sizes.setdefault(run["variant"], {})[key] = fused["members"] if fused else 1
    from ablate.sweep.arrays import describe_sizes

    assert said == [f"{v}: {describe_sizes(sorted(s.values(), reverse=True))}" for v, s in sizes.items()]
    recorded = json.loads((sweep_dir / ARRAYS_FILE).read_text())["arrays"]
    assert sorted(len(a) for a in recorded) == sorted(n for s in sizes.values() for n in s.values())
