"""Running sweeps for real: results, skips on relaunch, failures recorded, kill and resume, two launchers."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from tests.sweep.conftest import ablate_cli, ablate_here, plan_of, run_attempts, run_statuses, sweep_file

pytestmark = pytest.mark.slow

def test_sweep_runs_records_failures_and_skips_finished_runs_on_relaunch(tmp_path):
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: pre, model.norm_position: pre}
        - {name: diverges, train.schedule_args.scale: 1.0e+30, train.log_every: 1}
    """)
    first = ablate_here("sweep", str(path), "--workers", "2", cwd=tmp_path)
    sweep_dir = tmp_path / "sweeps" / "t"
    assert first.returncode == 1, first.stderr[-2000:]  # one run failed; the sweep went on
    assert first.stdout.strip().splitlines()[-1] == "sweeps/t"
    assert run_statuses(sweep_dir) == ["finished", "finished", "failed"]
    failed = json.loads((sweep_dir / plan_of(sweep_dir)["runs"][2]["run_dir"] / "result.json").read_text())
    assert "train/loss is" in failed["error"]
    assert "1 of 3 runs failed" in first.stderr

    again = ablate_here("sweep", str(path), cwd=tmp_path)  # nothing left to do: no run trains again
    assert run_attempts(sweep_dir) == [1, 1, 1] and again.returncode == 1
    retry = ablate_here("sweep", str(path), "--retry-failed", cwd=tmp_path)
    assert run_attempts(sweep_dir) == [1, 1, 2] and retry.returncode == 1


def test_killed_sweep_resumes_and_ends_with_exactly_the_planned_runs(tmp_path):
    path = sweep_file(tmp_path, """
        - {name: a, train.max_steps: 60, train.val_every: 10}
        - {name: b, model.n_heads: 2, train.max_steps: 60, train.val_every: 10}
    """)
    sweep_dir = tmp_path / "sweeps" / "t"
    proc = ablate_cli("sweep", str(path), cwd=tmp_path, background=True)
    first_ckpt = None
    deadline = time.time() + 300
    while time.time() < deadline and first_ckpt is None:  # kill once the first run has a checkpoint
        found = list(sweep_dir.glob("runs/*/checkpoints/last.ckpt"))
        first_ckpt = found[0] if found else None
        time.sleep(0.2)
    assert first_ckpt is not None, "no checkpoint appeared"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _wait_released(first_ckpt.parents[1])  # the child gets SIGTERM from the kernel when its parent dies, and exits
    assert "finished" not in run_statuses(sweep_dir)

    resumed = ablate_cli("sweep", str(path), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert run_statuses(sweep_dir) == ["finished", "finished"]
    results = [json.loads((sweep_dir / r["run_dir"] / "result.json").read_text()) for r in plan_of(sweep_dir)["runs"]]
    assert all(r["step"] == 60 for r in results)
    assert any(r["resumed_from"] for r in results)  # the killed run continued from its checkpoint
    assert sorted(p.name for p in (sweep_dir / "runs").iterdir()) == sorted(r["id"] for r in plan_of(sweep_dir)["runs"])


def test_two_launchers_on_one_sweep_never_train_a_run_twice(tmp_path):
    path = sweep_file(tmp_path, """
        - {name: a}
        - {name: b, model.n_heads: 2}
        - {name: c, model.ffn: gelu}
    """)
    procs = [ablate_cli("sweep", str(path), cwd=tmp_path, background=True) for _ in range(2)]
    codes = [p.wait(timeout=600) for p in procs]
    sweep_dir = tmp_path / "sweeps" / "t"
    assert codes == [0, 0], [p.stderr.read()[-2000:] for p in procs]
    assert run_statuses(sweep_dir) == ["finished"] * 3
    assert run_attempts(sweep_dir) == [1, 1, 1]


def test_a_run_killed_by_the_kernel_is_recorded_as_failed(tmp_path):
    """A run that dies without a word (SIGKILL, as the OOM killer sends) is failed, with the reason."""
    (tmp_path / "sudden_death.py").write_text(textwrap.dedent('''
        import os, signal
        from ablate import register
        from ablate.data.synthetic import SyntheticSeq2Seq

        @register("task", "sudden_death")
        def sudden_death(*, data, seed):
            """Dies like an out-of-memory kill when its data is set up."""
            class Dying(SyntheticSeq2Seq):
                def setup(self, stage=None):
                    os.kill(os.getpid(), signal.SIGKILL)
            return Dying(data, seed, list, min_len=1, n_train=10, n_val=10)
    '''))
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: dies, data.task: sudden_death, data.task_args: {}, imports: [sudden_death]}
    """)
    out = ablate_cli("sweep", str(path), cwd=tmp_path)
    sweep_dir = tmp_path / "sweeps" / "t"
    assert out.returncode == 1
    assert run_statuses(sweep_dir) == ["finished", "failed"]
    result = json.loads((sweep_dir / plan_of(sweep_dir)["runs"][1]["run_dir"] / "result.json").read_text())
    assert result["error"].startswith("killed by SIGKILL (out of memory?)")


def _wait_released(run_dir: Path, timeout: float = 300.0) -> None:
    """Wait until no process holds the run's lock (its training process has exited: the kernel drops a flock
    with its holder)."""
    deadline = time.monotonic() + timeout
    with open(run_dir / ".lock") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{run_dir}'s training process still holds its lock"
                time.sleep(0.05)


@pytest.mark.parametrize("code, status", [(130, "interrupted"), (-signal.SIGINT, "interrupted"),
                                          (-signal.SIGTERM, "interrupted"), (-signal.SIGKILL, "failed"), (1, "failed")])
def test_a_run_stopped_before_it_could_say_so_is_interrupted_not_failed(tmp_path, monkeypatch, code, status):
    """Ctrl-C (or the sweep going away) while a worker was starting a run: the run wrote nothing yet. It is
    interrupted, so a plain relaunch resumes it; only a run that died on its own is failed."""
    from ablate.sweep import job, runner
    from ablate.sweep.children import Children
    from ablate.sweep.plan import PlannedRun

    monkeypatch.setattr(job, "run_ablate", lambda *a, **k: code)
    run = PlannedRun(id="r", variant="v", seed=0, varied={}, overrides=[], labels=[], run_dir="runs/r", parameters=1,
                     flops_per_token=1.0)
    job.run_job(job.Job((run,), ("seed: 0\n",)), tmp_path, env={}, children=Children(), fresh=True)
    assert json.loads((tmp_path / "runs/r/result.json").read_text())["status"] == status
    todo, _ = runner.pending([run], tmp_path, retry_failed=False)
    assert (todo == [run]) == (status == "interrupted")
