"""Stopping a sweep from outside: Ctrl-C (SIGINT to the terminal's process group) or SIGTERM (to the sweep process, as
a scheduler sends) ends it with exit 128 + the signal and one line, on its own line and without a traceback, that
names the command that resumes it; that command (run as printed) finishes the sweep."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tests.sweep.conftest import run_statuses, sweep_file

pytestmark = pytest.mark.slow

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _ablate(args: list[str], cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ablate.cli", *args], cwd=cwd, env=ENV, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _when(found, proc: subprocess.Popen) -> None:
    """Wait for an event (``found()``) while the sweep runs."""
    deadline = time.monotonic() + 300
    while not found() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1][-2000:]


@pytest.mark.parametrize("signum, to_group, when", [(signal.SIGINT, True, "plan.json"),
                                                    (signal.SIGTERM, False, "runs/*/progress.json")])
def test_a_stopped_sweep_says_in_one_line_how_to_resume_it_and_that_resumes_it(tmp_path, signum, to_group, when):
    path = sweep_file(tmp_path, """
        - {name: base, train.max_steps: 16, train.val_every: 4}
        - {name: pre, model.norm_position: pre, train.max_steps: 16, train.val_every: 4}
    """)
    sweep_dir = tmp_path / "sweeps" / "t"
    proc = _ablate(["sweep", str(path), "--workers", "1"], tmp_path)
    _when(lambda: any(sweep_dir.glob(when)), proc)  # early (the warm server importing) or mid-run
    (os.killpg if to_group else os.kill)(proc.pid, signum)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signum, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith(f"ablate: interrupted by {signal.Signals(signum).name}:"), err[-3000:]
    assert "finished" not in run_statuses(sweep_dir)[1:]
    command = last.split("with: ", 1)[1]
    words = shlex.split(command)
    assert words[:2] == ["ablate", "sweep"]
    again = subprocess.run([sys.executable, "-m", "ablate.cli", *words[1:]], cwd=tmp_path, env=ENV,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert run_statuses(sweep_dir) == ["finished", "finished"]
