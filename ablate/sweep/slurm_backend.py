"""Sweeps on a Slurm cluster (``ablate sweep SWEEP.yaml --backend slurm``), through submitit.

The plan, the queue (grid, random, bayes, the sequential design's looks), hyperband, progress, the report and W&B
logging are the local pool's (:func:`ablate.sweep.runner.execute`); only where a job runs changes: each job (a run,
or a seed array with ``--fuse on``) is a Slurm job that runs :func:`ablate.sweep.job.run_job` on its node, with the
resources of :class:`SlurmSettings` (the sweep file's ``slurm:`` section, then the command line's options). The jobs
the pool starts at once go to Slurm as one job array, at most ``max_jobs`` running at a time.

What a cluster does to a job, and what ablate does then:

- **Preemption** (``scontrol requeue``, a higher-priority job): Slurm sends SIGTERM to the job's processes. The run
  saves the step it is in and records itself interrupted (:mod:`ablate.train.signals`); submitit's wrapper ignores
  SIGTERM; Slurm puts the job back in the queue, and when it starts again the run resumes from that step, exactly.
- **Time limit**: Slurm sends SIGUSR2 ``signal_delay_s`` before it (``--signal``); submitit's wrapper calls
  :meth:`NodeJob.checkpoint`, which passes SIGTERM on to the run (it saves its step) and hands submitit the same job
  to requeue (at most ``max_timeouts`` times).
- **A job that died with its node** (no word from its runs): Slurm requeues it when the cluster allows
  (``JobRequeue``); if it ended for good, the launcher submits it again, at most :data:`RESUBMITS` times.
- **The launcher killed and relaunched**: the jobs it submitted are recorded in ``<sweep_dir>/slurm/jobs.json``
  before it waits for them; a relaunch waits for the ones still queued or running (``squeue``) instead of
  submitting them again, and submits only what is missing. The run lock (:mod:`ablate.runs.lock`) keeps any run
  from training twice at once whatever happens.

Run directories must be on a filesystem every node sees (the sweep directory is passed as an absolute path).
submitit is an optional extra: ``pip install -e ".[slurm]"``.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ablate.errors import COMMAND_LINE, ConfigError
from ablate.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED
from ablate.runs.files import read_json, read_result, write_json
from ablate.runs.status import SETTLED, Status
from ablate.runs.sweep_folder import slurm_dir, slurm_jobs
from ablate.runtime import LEAVE_SIGNALS
from ablate.sweep.children import Children
from ablate.sweep.job import Ended, Job, record_end, run_job
from ablate.sweep.slurm_settings import OPTION, SlurmSettings

TIME_LIMIT_SIGNAL = "SIGUSR2"  # submitit's: Slurm sends it signal_delay_s before the time limit (--signal)
POLL_EVERY = 2.0  # seconds between two looks at the queue (one squeue call for every job the launcher waits for)
RESUBMITS = 2  # a job that ended with runs neither settled nor interrupted (its node died) is submitted again
DIED = ("NODE_FAIL", "BOOT_FAIL", "LAUNCH_FAILED")  # sacct's word for a job that died with its node: submitted again
QUEUED = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
          "REQUEUE_FED", "STAGE_OUT", "SIGNALING", "PREEMPTED")  # a job Slurm still holds: it runs, or will


def _submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise ConfigError("--backend", "slurm", 'submitit installed: pip install -e ".[slurm]" (or pip install '
                          'submitit)', COMMAND_LINE) from None
    return submitit


def _refusal(err: subprocess.CalledProcessError | Exception) -> str:
    """The line Slurm gave for a refused submission (``sbatch: error: ...``), else the error in one line."""
    text = " ".join(str(getattr(err, "stderr", None) or getattr(err, "output", None) or err).split())
    for marker in ("sbatch: error:", "error:"):
        if marker in text:
            return text[text.index(marker):][:300]
    return text[:300]


class NodeJob:
    """What a Slurm job runs on its node: one job through :func:`ablate.sweep.job.run_job`, its runs' ends written
    to ``<sweep_dir>/slurm/<job key>.ended.json`` for the launcher. A submitit checkpointable: on SIGUSR2 (the time
    limit near) :meth:`checkpoint` stops the runs, which save their step, and returns the job to requeue."""

    def __init__(self, job: dict[str, Any], sweep_dir: str, cwd: str, env: dict[str, str]):
        self.job, self.sweep_dir, self.cwd, self.env = job, sweep_dir, cwd, env
        self._children: Children | None = None
        self._thread: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"job": self.job, "sweep_dir": self.sweep_dir, "cwd": self.cwd, "env": self.env}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)

    def __call__(self) -> list[Ended]:
        spec, sweep_dir = Job.from_json(self.job), Path(self.sweep_dir)
        ended_file = ended_path(sweep_dir, spec)
        ended_file.unlink(missing_ok=True)  # a word from an earlier attempt is no word from this one
        self._children, out = Children(), []
        # The job runs in a thread so that the main thread, where submitit's SIGUSR2 handler runs, stays free to
        # stop it (a handler may not wait on the very Popen the main thread is waiting on).
        self._thread = threading.Thread(target=lambda: out.extend(
            run_job(spec, sweep_dir, env=self.env, children=self._children, cwd=Path(self.cwd), fresh=True)))
        self._thread.start()
        self._thread.join()
        write_json(ended_file, {"ended": [list(e) for e in out], "restarts": int(os.environ.get(
            "SLURM_RESTART_COUNT", "0"))})
        return out

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """The time limit is near (SIGUSR2): the runs save the step they are in, and submitit requeues this job."""
        from submitit.helpers import DelayedSubmission

        if self._children is not None:
            self._children.stop(signal.SIGTERM)
        if self._thread is not None:
            self._thread.join()
        return DelayedSubmission(NodeJob(self.job, self.sweep_dir, self.cwd, self.env))


def ended_path(sweep_dir: Path, job: Job) -> Path:
    """How a job's runs ended, written on its node (its word for the launcher)."""
    return slurm_dir(sweep_dir) / f"{job.key}.ended.json"


jobs_path = slurm_jobs  # the record of the jobs submitted: {job key: {id, runs, submitted}}


def final_state(job_id: str) -> str | None:
    """sacct's state of a job that has left the queue (``CANCELLED``, ``NODE_FAIL``, ...); None without accounting."""
    try:
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", job_id], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split() if out.returncode == 0 else []
    return words[0] if words else None  # "CANCELLED by 0" -> "CANCELLED"


def queue_states(user: str | None = None) -> dict[str, str] | None:
    """Every job of ``user`` (default: this one) Slurm still holds, by id (an array's tasks as ``ID_I``), with its
    state; None when Slurm did not answer."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-u", user or getpass.getuser(), "-o", "%i %T"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return dict(line.split(None, 1) for line in out.stdout.splitlines() if len(line.split(None, 1)) == 2)


@dataclass
class _Queue:
    """One ``squeue`` call per :data:`POLL_EVERY` for all the waits of a launcher."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    states: dict[str, str] | None = None
    at: float = float("-inf")

    def state(self, job_id: str) -> str | None:
        """The job's state while Slurm holds it; None once it has left the queue ("?" when Slurm does not answer).
        A job missing from the last snapshot is looked up again: it may have been submitted after it."""
        with self.lock:
            for fresh in (False, True):
                if fresh or time.monotonic() - self.at >= POLL_EVERY:
                    self.states, self.at = queue_states(), time.monotonic()
                if self.states is None:
                    return "?"
                if job_id in self.states:
                    return self.states[job_id]
            return None


class SlurmBackend:
    """Runs each job as a Slurm job (:class:`ablate.sweep.runner.Backend`); :func:`ablate.sweep.launch.launch` uses
    its ``slots``, and :meth:`open` binds it to the sweep's folder."""

    job_name = "a Slurm job"
    fuses = True

    def __init__(self, settings: SlurmSettings):
        self.settings = settings
        self.sweep_dir: Path | None = None
        self._record_lock = threading.Lock()
        self._queue = _Queue()
        self._stopping = threading.Event()
        self._executor: Any = None

    @classmethod
    def connect(cls, settings: SlurmSettings, *, dry_run: bool = False) -> SlurmBackend:
        """A backend for this machine's Slurm cluster; unless ``dry_run``, the resources checked by Slurm first
        (``sbatch --test-only``), so that a refused submission is one line before anything is written.

        Raises:
            ConfigError: submitit or Slurm's commands are missing, or Slurm refuses the resources.
        """
        _submitit()
        if shutil.which("sbatch") is None or shutil.which("squeue") is None:
            raise ConfigError("--backend", "slurm", "Slurm's sbatch and squeue on PATH (this machine is not a Slurm "
                              "login node: run the sweep where sbatch works)", COMMAND_LINE)
        if not dry_run:
            test = subprocess.run(["sbatch", "--test-only", *settings.sbatch_options(), "--wrap", "true"],
                                  capture_output=True, text=True, timeout=120)
            if test.returncode != 0:
                key = next((OPTION[k] for k in ("partition", "account", "qos") if getattr(settings, k)
                            and getattr(settings, k) in test.stderr), "--backend")
                raise ConfigError(key, getattr(settings, key.removeprefix("--"), "slurm"),
                                  f"what this cluster accepts: Slurm refused the job ({_refusal(test)})",
                                  COMMAND_LINE)
        return cls(settings)

    def slots(self, pending: int | None) -> list[dict[str, str]]:
        """As many jobs in flight as are pending, at most ``max_jobs``: Slurm queues what its nodes cannot hold."""
        return [{}] * max(1, min(self.settings.max_jobs, pending or self.settings.max_jobs))

    def open(self, sweep_dir: Path) -> SlurmBackend:
        """Bind to ``sweep_dir`` (an absolute path: the nodes see it at the same path)."""
        submitit = _submitit()
        self.sweep_dir = Path(sweep_dir).resolve()
        self._executor = submitit.SlurmExecutor(folder=slurm_dir(self.sweep_dir) / "%j",
                                                max_num_timeout=self.settings.max_timeouts)
        self._executor.update_parameters(job_name=f"ablate-{self.sweep_dir.name}",
                                         **self.settings.executor_parameters())
        return self

    def _record(self) -> dict[str, Any]:
        path = jobs_path(self.sweep_dir)
        record = read_json(path) if path.is_file() else {}
        return record if isinstance(record, dict) else {}

    def submit(self, jobs: list[tuple[Job, dict[str, str]]]) -> list[Callable[[], list[Ended]]]:
        """Wait for each job's recorded Slurm job if Slurm still holds it; submit the others, together as one job
        array, and record their ids before waiting for them.

        Raises:
            ConfigError: Slurm refused the submission (one line, its reason).
        """
        record = self._record()
        attached = {}
        for job, _ in jobs:
            known = record.get(job.key) or {}
            if known.get("id") and self._queue.state(known["id"]) not in (None, "?"):
                attached[job.key] = known["id"]
        new = [job for job, _ in jobs if job.key not in attached]
        if new:
            self._sbatch(new)
        return [self._waiter(job) for job, _ in jobs]

    def _sbatch(self, jobs: list[Job]) -> None:
        """Submit ``jobs`` (one job array when several) and record their Slurm job ids, each job's count of
        submissions one more."""
        ids = self._submitted(jobs)
        with self._record_lock:
            record = self._record()
            for job, job_id in zip(jobs, ids):
                was = record.get(job.key) or {}
                record[job.key] = {"id": job_id, "runs": [r.id for r in job.runs],
                                   "submitted": was.get("submitted", 0) + 1}
            write_json(jobs_path(self.sweep_dir), record)

    def _submitted(self, jobs: list[Job]) -> list[str]:
        """Submit ``jobs`` through submitit; their Slurm job ids."""
        threads = str(self.settings.cpus_per_run)
        env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, LEAVE_SIGNALS: TIME_LIMIT_SIGNAL}
        calls = [NodeJob(job.to_json(), str(self.sweep_dir), os.getcwd(), env) for job in jobs]
        for job in jobs:  # the word of an earlier job of the same key is no word from this one
            ended_path(self.sweep_dir, job).unlink(missing_ok=True)
        try:
            if len(calls) == 1:
                return [self._executor.submit(calls[0]).job_id]
            with self._executor.batch():
                submitted = [self._executor.submit(call) for call in calls]
            return [s.job_id for s in submitted]
        except Exception as exc:  # submitit raises its own errors around sbatch's
            raise ConfigError("--backend", "slurm", f"a submission Slurm accepts ({_refusal(exc)})",
                              COMMAND_LINE) from None

    def _waiter(self, job: Job) -> Callable[[], list[Ended]]:
        def wait() -> list[Ended]:
            while True:
                job_id = (self._record().get(job.key) or {}).get("id")
                while not self._stopping.is_set() and self._queue.state(job_id) is not None:
                    self._stopping.wait(POLL_EVERY)
                if self._stopping.is_set():
                    return [(EXIT_INTERRUPTED, f"the launcher stopped; Slurm job {job_id} goes on")] * len(job.runs)
                state = final_state(job_id)
                if state in QUEUED:  # squeue and the accounting disagree for a moment: ask the queue again
                    self._stopping.wait(POLL_EVERY)
                    continue
                ended = self._ended(job, job_id, state)
                if ended is not None:
                    return ended
                self._sbatch([job])  # it ended without a word (its node died): again, under a new id
        return wait

    def _ended(self, job: Job, job_id: str, state: str | None) -> list[Ended] | None:
        """How ``job``'s runs ended once its Slurm job left the queue: the node's word, else their records; None when
        it died without a word (its node died: sacct's :data:`DIED`, or no accounting to ask) and its runs are
        neither settled nor interrupted, to be submitted again. A job cancelled in Slurm (``scancel``) leaves its
        runs interrupted: a relaunch resumes them."""
        path = ended_path(self.sweep_dir, job)
        if path.is_file():
            return [tuple(e) for e in read_json(path)["ended"]]
        statuses = [(read_result(self.sweep_dir / r.run_dir) or {}).get("status") for r in job.runs]
        submitted = (self._record().get(job.key) or {}).get("submitted", 1)
        log = slurm_dir(self.sweep_dir) / str(job_id)
        if state is not None and state.startswith("CANCELLED"):
            why = f"Slurm job {job_id} was cancelled ({state}); see {log}"
            return [(0, "") if s in (Status.FINISHED, Status.STOPPED) else
                    (EXIT_TERMINATED, record_end(self.sweep_dir / r.run_dir, EXIT_TERMINATED, log, why))
                    for r, s in zip(job.runs, statuses)]
        if (state in (*DIED, None) and submitted <= RESUBMITS
                and not all(s in (*SETTLED, Status.INTERRUPTED) for s in statuses)):
            return None
        errors = sorted(log.glob("*_log.err")) if log.is_dir() else []
        return [(0, "") if s in (Status.FINISHED, Status.STOPPED) else
                (EXIT_FAILED, record_end(self.sweep_dir / r.run_dir, EXIT_FAILED, errors[-1] if errors else log))
                for r, s in zip(job.runs, statuses)]

    def stop(self, signum: int) -> None:
        """The launcher stops waiting; the Slurm jobs go on, and a relaunch waits for them again."""
        self._stopping.set()
