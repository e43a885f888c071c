"""``ablate sweep --backend slurm`` on a real single-node Slurm cluster (``tests/sweep/slurm_cluster.py``: Debian's
slurmctld, slurmd, slurmdbd and munge, started for this module; skipped with the reason when they are absent, and
``.ci/run`` installs them so that CI runs these tests).

What a Slurm user relies on: the same runs and verdicts as the local pool; a job preempted mid-run
(``scontrol requeue``) resumes to the value of the uninterrupted run; a job that reaches its time limit saves its
step, is requeued and finishes; a launcher killed and relaunched waits for its jobs and submits nothing twice; a
submission Slurm refuses is one line, exit 2, nothing written.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
import os
import signal
import time
from pathlib import Path

import pytest

from tests.sweep.conftest import ablate_cli, plan_of, run_attempts, run_statuses, sweep_file

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm")]

ROWS = """
    - {name: base}
    - {name: heads, model.n_heads: 2}
"""
ONE_THREAD = "trainer.threads=1"  # every run on one thread, whichever backend: the same arithmetic, the same numbers
TIMING = ("tokens_per_s", "wall_time_s")  # table.csv's columns that measure the machine, not the runs
DEADLINE = 600.0  # seconds a test waits for an event before it fails naming it


def _sweep(tmp_path: Path, rows: str = ROWS, seeds: int = 2, steps: int = 8) -> Path:
    path = sweep_file(tmp_path, rows)
    path.write_text(path.read_text().replace("train.max_steps=8", f"train.max_steps={steps}")
                    + f"parameters:\n  seed: {{values: {list(range(seeds))}}}\n")
    return path


def _slurm(cluster, *extra: str) -> list[str]:
    return ["--backend", "slurm", "--partition", cluster.partition, "--time-limit", "10", *extra]


def _table(sweep_dir: Path) -> list[dict[str, str]]:
    with open(sweep_dir / "report" / "table.csv") as f:
        return [{k: v for k, v in row.items() if not k.startswith(TIMING)} for row in csv.DictReader(f)]


def _finals(sweep_dir: Path) -> dict[str, float]:
    out = {}
    for run in plan_of(sweep_dir)["runs"]:
        result = json.loads((sweep_dir / run["run_dir"] / "result.json").read_text())
        out[run["id"]] = result["final"]["val/loss"]
    return out


def _jobs(sweep_dir: Path) -> dict:
    return json.loads((sweep_dir / "slurm" / "jobs.json").read_text())


def _wait_for(what: str, ready, deadline: float = DEADLINE):
    """Poll ``ready()`` until it returns something true; fail naming ``what`` past the deadline."""
    end = time.monotonic() + deadline
    while True:
        value = ready()
        if value:
            return value
        assert time.monotonic() < end, f"waited {deadline:.0f} s for {what}"
        time.sleep(0.2)


def _validated_at(run_dir: Path) -> int:
    """The last step the run validated at (its progress.json, written atomically), 0 before its first validation."""
    path = run_dir / "progress.json"
    history = json.loads(path.read_text()).get("history", {}).get("val/loss", []) if path.is_file() else []
    return int(history[-1][0]) if history else 0


def test_a_slurm_sweep_gives_the_local_pools_runs_and_table(slurm_cluster, tmp_path):
    """Same sweep file, same runs (ids are config hashes), same values and verdicts as the local pool. With two jobs
    at a time, the first two runs went to Slurm together, as one job array (its tasks share the array's id); the
    others as slots came free, after the launcher's last look at the queue (how many at once depends on when the
    first ones end)."""
    path = _sweep(tmp_path)
    local = ablate_cli("sweep", str(path), ONE_THREAD, "--out", str(tmp_path / "local"), "--workers", "1",
                       cwd=tmp_path)
    assert local.returncode == 0, local.stderr[-2000:]
    slurm = ablate_cli("sweep", str(path), ONE_THREAD, "--out", str(tmp_path / "slurm"),
                       *_slurm(slurm_cluster, "--max-jobs", "2"), cwd=tmp_path)
    assert slurm.returncode == 0, slurm.stderr[-2000:]
    ids = [r["id"] for r in plan_of(tmp_path / "local")["runs"]]
    assert [r["id"] for r in plan_of(tmp_path / "slurm")["runs"]] == ids
    assert _finals(tmp_path / "slurm") == _finals(tmp_path / "local")
    assert _table(tmp_path / "slurm") == _table(tmp_path / "local")
    jobs = _jobs(tmp_path / "slurm")
    ids = [j["id"] for j in jobs.values()]
    assert len(set(ids)) == 4 and all(j["submitted"] == 1 for j in jobs.values())
    arrays = Counter(i.split("_")[0] for i in ids if "_" in i)
    assert 2 in arrays.values(), ids  # the first round: one array of two tasks


LONG = ["- {name: base}", 1, 300]  # one run long enough to be stopped mid-way: rows, seeds, steps
LONG_EXTRA = [ONE_THREAD, "train.val_every=50"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, float]:
    """The long run's final val/loss, trained by the local pool without a stop."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    path = _sweep(folder, *LONG)
    local = ablate_cli("sweep", str(path), *LONG_EXTRA, "--out", str(folder / "local"), cwd=folder)
    assert local.returncode == 0, local.stderr[-2000:]
    return _finals(folder / "local")


def _stopped_mid_run(cluster, tmp_path: Path, stop) -> Path:
    """Launch the long run on Slurm, call ``stop(job_id)`` once it has validated at step 50, and wait for the
    launcher; its sweep folder."""
    path, sweep_dir = _sweep(tmp_path, *LONG), tmp_path / "slurm"
    proc = ablate_cli("sweep", str(path), *LONG_EXTRA, "--out", str(sweep_dir), *_slurm(cluster), cwd=tmp_path,
                      background=True)
    try:
        runs = _wait_for("the plan", lambda: (sweep_dir / "plan.json").is_file() and plan_of(sweep_dir)["runs"])
        _wait_for("the run's first validation (step 50)", lambda: _validated_at(sweep_dir / runs[0]["run_dir"]) >= 50)
        (job,) = _jobs(sweep_dir).values()
        stop(job["id"])
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    return sweep_dir


def _resumed_once(sweep_dir: Path, uninterrupted: dict[str, float]) -> None:
    """The run was stopped by SIGTERM mid-run, saved its step, trained again in a second attempt of the same Slurm job
    (never submitted again by ablate), and ended at the uninterrupted run's value."""
    (run,) = plan_of(sweep_dir)["runs"]
    ended = json.loads((sweep_dir / "slurm" / f"{run['id']}.ended.json").read_text())
    assert ended["restarts"] >= 1 and ended["ended"] == [[0, "exit code 0"]]  # the second attempt wrote the job's end
    log = (sweep_dir / run["run_dir"] / "train.log").read_text()
    assert "interrupted by SIGTERM at step" in log and "killed by" not in log, log[-3000:]
    assert run_attempts(sweep_dir) == [2]  # trained in two attempts, the second from the first's saved step
    assert [j["submitted"] for j in _jobs(sweep_dir).values()] == [1]
    assert _finals(sweep_dir) == uninterrupted


def test_a_job_requeued_mid_run_resumes_to_the_uninterrupted_value(slurm_cluster, tmp_path, uninterrupted):
    """``scontrol requeue`` (what preemption does): Slurm sends SIGTERM to the job's processes; the run saves its
    step and records itself interrupted, Slurm starts the job again, and the run resumes from that step."""
    sweep_dir = _stopped_mid_run(slurm_cluster, tmp_path, lambda job: slurm_cluster.run("scontrol", "requeue", job))
    _resumed_once(sweep_dir, uninterrupted)


def test_a_job_at_its_time_limit_saves_its_step_is_requeued_and_resumes(slurm_cluster, tmp_path, uninterrupted):
    """Before a job's time limit Slurm sends SIGUSR2 to the job step's processes (submitit's ``--signal=USR2@T``);
    here ``scancel --signal=USR2`` sends it once the run has validated, the same signal to the same processes, so the
    test does not wait on slurmctld's timer (``docs/slurm.md`` shows the timer's own). The run leaves it to the
    wrapper (a run's default would be to die unsaved), which stops the run with SIGTERM, waits for it to save its
    step, and requeues the job; the run resumes to the uninterrupted value."""
    sweep_dir = _stopped_mid_run(slurm_cluster, tmp_path,
                                 lambda job: slurm_cluster.run("scancel", "--signal=USR2", job))
    _resumed_once(sweep_dir, uninterrupted)
    assert "timed-out" in "".join(p.read_text() for p in (sweep_dir / "slurm").glob("*/*_log.err"))


def test_a_launcher_killed_and_relaunched_waits_for_its_jobs_and_submits_nothing_twice(slurm_cluster, tmp_path):
    """SIGKILL the launcher while its jobs run: they go on; the relaunch finds them in the queue, waits for them and
    submits none again (sacct lists one job per run)."""
    path = _sweep(tmp_path, seeds=1, steps=200)
    sweep_dir = tmp_path / "s"
    args = ["sweep", str(path), ONE_THREAD, "--out", str(sweep_dir), *_slurm(slurm_cluster)]
    proc = ablate_cli(*args, cwd=tmp_path, background=True)
    try:
        _wait_for("two jobs recorded", lambda: (sweep_dir / "slurm" / "jobs.json").is_file()
                  and len(_jobs(sweep_dir)) == 2)
        _wait_for("a run training", lambda: any(_validated_at(sweep_dir / r["run_dir"]) > 0
                                                for r in plan_of(sweep_dir)["runs"]))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        proc.kill()
    first = _jobs(sweep_dir)
    again = ablate_cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert run_statuses(sweep_dir) == ["finished", "finished"]
    assert _jobs(sweep_dir) == first  # same ids, each submitted once
    ids = {j["id"] for j in first.values()}
    listed = slurm_cluster.run("sacct", "-n", "-X", "-o", "JobID", "-S", "now-1hour").stdout.split()
    assert ids <= set(listed)
    names = slurm_cluster.run("sacct", "-n", "-X", "-o", "JobName%60", "-S", "now-1hour").stdout.split()
    assert names.count(f"ablate-{sweep_dir.name}") == len(ids)  # no job of this sweep beyond those


def test_a_partition_slurm_refuses_is_one_line_exit_2_and_nothing_written(slurm_cluster, tmp_path):
    path = _sweep(tmp_path, seeds=1)
    out = ablate_cli("sweep", str(path), "--out", str(tmp_path / "s"), "--backend", "slurm", "--partition", "nope",
                     cwd=tmp_path)
    assert out.returncode == 2
    line = out.stderr.strip()
    assert line.count("\n") == 0 and line.startswith("ablate: error: ") and "--partition='nope'" in line, line
    assert "invalid partition" in line.lower(), line
    assert not (tmp_path / "s").exists()
