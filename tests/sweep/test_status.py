"""``ablate status SWEEP``: runs' states (a run is running only while a process holds its lock), each row's verdict,
what an undecided row's next look waits for, and the time left; on a fabricated sequential sweep folder."""

from __future__ import annotations

import fcntl
import json

from tests.conftest import ablate_here
from tests.report.conftest import make_verdict_sweep

ROWS = {"base": (4, 0.0), "far": (3, 1.0), "close": (4, 0.1)}  # far: decided at its first look; close: at the margin


def _status(sweep_dir) -> list[str]:
    out = ablate_here("status", str(sweep_dir), cwd=sweep_dir.parent)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_status_gives_each_rows_verdict_and_what_an_undecided_rows_next_look_waits_for(tmp_path):
    lines = _status(make_verdict_sweep(tmp_path, ROWS))
    assert lines[0] == "sweep quickstart: 11 runs planned: 11 finished"
    assert "  row far: worse, decided at 3 seeds" in lines
    close = next(x for x in lines if x.startswith("  row close:"))
    assert close.endswith("at 4 seeds; its look at 5 waits for close seed 4, base seed 4"), close
    assert lines[-1] == "2 runs to go at the next looks: about 42s left at 21 s a run over 1 at a time"


def test_a_run_is_running_while_its_lock_is_held_and_lost_once_its_process_is_gone(tmp_path):
    sweep_dir = make_verdict_sweep(tmp_path, ROWS)
    run_dir = sweep_dir / json.loads((sweep_dir / "plan.json").read_text())["runs"][-1]["run_dir"]
    result = json.loads((run_dir / "result.json").read_text())
    (run_dir / "result.json").write_text(json.dumps({**result, "status": "running"}))
    (run_dir / "progress.json").write_text(json.dumps({"step": 300, "history": {"val/loss": [[300, 1.25]]}}))
    with open(run_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a training process holds
        held = _status(sweep_dir)
    gone = _status(sweep_dir)
    assert held[0] == "sweep quickstart: 11 runs planned: 10 finished, 1 running"
    assert "  running  close seed 3: validated at step 300, val/loss 1.25 there" in held
    assert gone[0] == "sweep quickstart: 11 runs planned: 10 finished, 1 lost"
    assert "  lost     close seed 3: validated at step 300, val/loss 1.25 there (its process is gone: a relaunch " \
           "resumes it)" in gone


def test_status_of_a_folder_that_is_no_sweep_is_one_line_exit_2(tmp_path):
    out = ablate_here("status", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "plan.json" in out.stderr
