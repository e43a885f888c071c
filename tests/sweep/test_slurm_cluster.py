"""The single-node Slurm cluster of ``slurm_cluster.py``, and the Slurm and submitit behaviour that the
``--backend slurm`` sweep backend relies on, shown on it: submission and its refusal, accounting (``sacct``),
two jobs side by side, and what a job and its children see when it is requeued or reaches its time limit.

The jobs run the callables of ``slurm_jobs.py``; they wait for files the tests write, never for time. Each wait
here polls a condition with a deadline and fails naming what it awaited.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.sweep.slurm_cluster import CRED_EXPIRE_S, KILL_WAIT_S

submitit = pytest.importorskip("submitit")  # the slurm extra
from tests.sweep import slurm_jobs  # noqa: E402  (imports submitit)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm")]

DEADLINE_S = 120
POLL_S = 0.2
# A requeued job's path back to RUNNING: killed (COMPLETING), then held for cred_expire (PENDING, or REQUEUED in
# sacct's record of the attempt that ended).
REQUEUE_STATES = {"COMPLETING", "REQUEUED", "PENDING", "RUNNING"}


def _await(what: str, ready, deadline_s: float = DEADLINE_S):
    """Polls ``ready()`` until it returns something true, and returns that; fails naming ``what`` past the
    deadline."""
    deadline = time.monotonic() + deadline_s
    while not (value := ready()):
        if time.monotonic() > deadline:
            pytest.fail(f"not within {deadline_s} s: {what}")
        time.sleep(POLL_S)
    return value


def _executor(folder: Path, **params) -> submitit.AutoExecutor:
    """A submitit executor for this cluster: one CPU, 256 MB, 5 minutes, and the repository importable in the job
    (it unpickles ``slurm_jobs``' callables by reference)."""
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(**{"timeout_min": 5, "cpus_per_task": 1, "mem_gb": 0.25,
                                  "slurm_setup": [f"export PYTHONPATH={REPO}"], **params})
    return executor


def _job_field(cluster, job_id: str, name: str) -> str:
    """A field of ``scontrol show job`` (``JobState``, ``Restarts``, ...)."""
    out = cluster.run("scontrol", "show", "job", job_id).stdout
    return re.search(rf"\b{name}=(\S*)", out).group(1)


def _sacct_states(cluster, job_id: str) -> list[str]:
    """Every attempt's state in the accounting database, oldest first (``--duplicates``: a requeued attempt too)."""
    out = cluster.run("sacct", "-n", "-X", "--duplicates", "-P", "-o", "State", "-j", job_id).stdout
    return out.split()


def _await_attempts(cluster, job_id: str, states: list[str]) -> None:
    """Waits for sacct to list ``states`` (its records lag a job's end by a moment)."""
    _await(f"sacct's attempts of job {job_id} {states}", lambda: _sacct_states(cluster, job_id) == states)


def _result(job):
    """``job.result()`` once submitit sees the job done (a forced ``sacct`` or its result file), so that a job that
    never finishes fails here rather than hanging in ``result()``."""
    _await(f"submitit job {job.job_id} done", lambda: job.done(force_check=True))
    return job.result()


def test_the_cluster_starts_within_a_minute_with_its_one_node_idle(slurm_cluster):
    assert slurm_cluster.started_in_s < 60
    out = slurm_cluster.run("sinfo", "-h", "-o", "%P %T %c %N").stdout.split()
    assert out == [f"{slurm_cluster.partition}*", "idle", _job_cpus(slurm_cluster), slurm_cluster.node]


def _job_cpus(cluster) -> str:
    return re.search(r"\bCPUs=(\d+)", cluster.conf.read_text()).group(1)


def test_sbatch_runs_a_wrapped_command_and_sacct_reports_it_completed(slurm_cluster, tmp_path):
    out = tmp_path / "out.txt"
    job_id = slurm_cluster.run("sbatch", "--parsable", "-o", str(out), "--wrap", "echo hello from $SLURM_JOB_ID"
                               ).stdout.strip()
    assert job_id.isdigit()
    _await(f"{out} written by job {job_id}", lambda: out.is_file() and out.read_text() == f"hello from {job_id}\n")
    _await_attempts(slurm_cluster, job_id, ["COMPLETED"])
    assert _job_field(slurm_cluster, job_id, "JobState") == "COMPLETED"  # MinJobAge keeps it in scontrol's view


def test_sbatch_refuses_an_unknown_partition_in_two_lines_that_name_it(slurm_cluster):
    ran = slurm_cluster.run("sbatch", "--partition=nope", "--wrap", "true", check=False)
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr == ("sbatch: error: invalid partition specified: nope\n"
                          "sbatch: error: Batch job submission failed: Invalid partition name specified\n")


def test_submitit_runs_a_function_on_the_cluster_and_returns_its_result(slurm_cluster, tmp_path):
    job = _executor(tmp_path).submit(slurm_jobs.describe, 21)
    assert _result(job) == {"double": 42, "job_id": job.job_id, "cpus": "1", "restart": None}
    _await(f"job {job.job_id} COMPLETED for submitit (sacct)",
           lambda: job.watcher.get_state(job.job_id, mode="force") == "COMPLETED")


def test_two_one_cpu_jobs_run_at_the_same_time(slurm_cluster, tmp_path):
    wait = f"for i in $(seq {DEADLINE_S * 5}); do [ -e {tmp_path}/go ] && exit 0; sleep 0.2; done; exit 1"
    ids = [slurm_cluster.run("sbatch", "--parsable", "-c", "1", "--mem=100M", "-o", str(tmp_path / "%j.out"),
                             "--wrap", wait).stdout.strip() for _ in range(2)]

    def running() -> bool:
        out = slurm_cluster.run("squeue", "-h", "-o", "%i %T", "-j", ",".join(ids)).stdout
        return sorted(out.split()) == sorted(ids + ["RUNNING", "RUNNING"])

    _await(f"jobs {ids} RUNNING together", running)
    (tmp_path / "go").touch()
    for job_id in ids:
        _await(f"job {job_id} COMPLETED", lambda: _job_field(slurm_cluster, job_id, "JobState") == "COMPLETED")


def test_a_requeued_checkpointable_job_is_killed_without_checkpoint_and_runs_again_to_its_result(slurm_cluster,
                                                                                                 tmp_path):
    """``scontrol requeue`` on a running submitit job: Slurm sends SIGCONT then SIGTERM to every process of the job
    (the batch shell, srun and submitit's Python in step 0, and their children) at once, and SIGKILL to those left
    after ``KillWait`` (5 s here, typically 30 s on a cluster). submitit's handler logs and *bypasses* SIGCONT and
    SIGTERM ("Bypassing signal SIGTERM"): the function runs on, is killed, and ``checkpoint()`` is never called
    (submitit checkpoints on SIGUSR2 only). The job waits ``cred_expire`` (10 s here, 120 s by default) in PENDING
    and runs again from the pickle it was submitted with, ``SLURM_RESTART_COUNT=1`` in its environment; whatever the
    first attempt saved itself (here: its progress file) is what the second resumes from. The same ``Job`` object's
    ``result()`` keeps waiting through the requeue (no result file; sacct says a not-done state) and returns the
    second attempt's result. sacct without ``--duplicates`` shows the latest attempt only."""
    job = _executor(tmp_path / "submitit").submit(slurm_jobs.CountSteps(str(tmp_path), steps=6, hold=3))
    progress = tmp_path / "progress"
    _await("the first attempt held at step 3", lambda: progress.is_file() and progress.read_text().count("\n") == 3)
    slurm_cluster.run("scontrol", "requeue", job.job_id)
    states = []

    def finished() -> bool:
        states.append(job.watcher.get_state(job.job_id, mode="force"))
        return states[-1] == "COMPLETED"

    _await(f"job {job.job_id} COMPLETED again after its requeue", finished)
    assert set(states) - {"COMPLETED"} <= REQUEUE_STATES and {"PENDING", "REQUEUED"} & set(states), states
    assert job.result() == {"restart": "1", "resumed_at": 3, "steps": 6}
    assert progress.read_text().split("\n") == ["0 0", "0 1", "0 2", "1 3", "1 4", "1 5", ""]
    assert not (tmp_path / "checkpointed").exists()
    log = job.stderr()
    assert "Bypassing signal SIGTERM" in log and "Bypassing signal SIGCONT" in log
    assert "Caught signal" not in log  # no SIGUSR2
    assert _job_field(slurm_cluster, job.job_id, "Restarts") == "1"
    _await_attempts(slurm_cluster, job.job_id, ["REQUEUED", "COMPLETED"])
    assert job.watcher.get_state(job.job_id, mode="force") == "COMPLETED"


def test_a_job_at_its_time_limit_gets_sigusr2_and_submitit_checkpoints_requeues_and_finishes_it(slurm_cluster,
                                                                                                 tmp_path):
    """submitit asks for ``--signal=USR2@<slurm_signal_delay_s>`` (90 s by default): Slurm sends SIGCONT and SIGUSR2
    to every process of the job's steps (submitit's Python *and its children*: not the batch shell) once the time
    left falls to that delay. slurmctld checks time limits every 30 s (its PERIODIC_TIMEOUT), so the signal comes
    up to 30 s late (here, with 1 minute and a delay of 55 s: 5 to 35 s after the start). submitit's SIGUSR2
    handler decides the job has timed out (elapsed >= min(0.8 * limit, limit - 10 min): always, for a limit of
    10 minutes or less), calls ``checkpoint()``, pickles what it returns in place of the submitted callable, runs
    ``scontrol requeue`` on its own job (so every process then gets SIGCONT and SIGTERM, as in the test above)
    and exits. The second attempt unpickles the checkpointed callable, with ``SLURM_RESTART_COUNT=1``. After
    ``max_num_timeout`` (3) time-outs it stops requeuing and records an error instead."""
    executor = _executor(tmp_path / "submitit", timeout_min=1, slurm_signal_delay_s=55)
    began = time.monotonic()
    job = executor.submit(slurm_jobs.OutlastTimeLimit(str(tmp_path)))
    assert _result(job) == {"attempts": 2, "checkpointed": True, "restart": "1"}
    assert time.monotonic() - began < 110
    log = job.stdout()  # submitit's log, every level (its stderr holds the warnings only)
    assert "Caught signal SIGUSR2 on" in log and "this job is timed-out" in log
    assert "Calling checkpoint method" in log and f"Requeued job {job.job_id} (2 remaining timeouts)" in log
    events = [line.split(" ", 1)[1] for line in (tmp_path / "child.log").read_text().splitlines()]
    # The child gets SIGUSR2 too (its default action would kill it), then SIGTERM from submitit's own requeue. Python
    # runs the handlers of signals pending together in signal-number order, so SIGCONT's place is not fixed.
    assert events[0] == "ready" and events[-1] == "got SIGTERM" and "got SIGUSR2" in events, events
    assert set(events) <= {"ready", "got SIGCONT", "got SIGUSR2", "got SIGTERM"}, events
    _await_attempts(slurm_cluster, job.job_id, ["REQUEUED", "COMPLETED"])


def test_a_child_of_the_job_gets_sigterm_at_once_when_the_job_is_requeued(slurm_cluster, tmp_path):
    """On ``scontrol requeue`` the function's child process (started with ``subprocess``, in the job's step) gets
    SIGCONT and then SIGTERM at once, well within ``KillWait``: a trainer that saves its step on SIGTERM has
    ``KillWait`` seconds to do it before SIGKILL. Here the child saves nothing and exits 143; the function then
    leaves with ``sys.exit`` (so submitit records no result) and the second attempt's result is the job's."""
    job = _executor(tmp_path / "submitit").submit(slurm_jobs.run_child, str(tmp_path), exit_on_sigterm=True)
    record = tmp_path / "child.log"
    _await("the first attempt's child ready", lambda: record.is_file() and "ready" in record.read_text())
    requeued_at = time.time()
    slurm_cluster.run("scontrol", "requeue", job.job_id)
    _await("SIGTERM recorded by the child", lambda: "got SIGTERM" in record.read_text())
    events = dict(reversed(line.split(" ", 1)) for line in record.read_text().splitlines())
    # SIGCONT comes first; Python would run SIGTERM's handler first (signal-number order) if both were pending
    assert set(events) <= {"ready", "got SIGCONT", "got SIGTERM"} and list(events)[-1] == "got SIGTERM", events
    assert float(events["got SIGTERM"]) - requeued_at < KILL_WAIT_S
    assert _result(job) == {"restart": "1", "first_child_exit": slurm_jobs.SIGTERM_EXIT}
    _await_attempts(slurm_cluster, job.job_id, ["REQUEUED", "COMPLETED"])


def test_a_function_that_returns_during_its_requeue_hands_result_its_first_attempts_value(slurm_cluster, tmp_path):
    """A trap for the backend: submitit writes a result file whenever the function returns (or raises), and a
    ``Job`` is done as soon as that file exists. A function that returns once its child has exited on SIGTERM
    leaves the first attempt's value there while Slurm holds the job for its next attempt: ``result()`` returns
    that value at once. The second attempt overwrites the file when it finishes; a new ``Job`` for the same id
    then reads the second value. So a function must not return after a requeue's SIGTERM: it should let the
    job be killed, or leave with ``sys.exit`` (which submitit does not record)."""
    folder = tmp_path / "submitit"
    job = _executor(folder).submit(slurm_jobs.run_child, str(tmp_path), exit_on_sigterm=False)
    record = tmp_path / "child.log"
    _await("the first attempt's child ready", lambda: record.is_file() and "ready" in record.read_text())
    slurm_cluster.run("scontrol", "requeue", job.job_id)
    _await("the first attempt's result file", job.paths.result_pickle.exists)
    assert job.done() and job.result() == {"restart": None, "child_exit": slurm_jobs.SIGTERM_EXIT}
    assert _job_field(slurm_cluster, job.job_id, "JobState") in REQUEUE_STATES - {"RUNNING"}  # held cred_expire s
    _await(f"job {job.job_id} COMPLETED after its requeue",
           lambda: _job_field(slurm_cluster, job.job_id, "JobState") == "COMPLETED",
           deadline_s=DEADLINE_S + CRED_EXPIRE_S)
    again = submitit.SlurmJob(folder=folder, job_id=job.job_id)
    assert again.result() == {"restart": "1", "first_child_exit": slurm_jobs.SIGTERM_EXIT}
