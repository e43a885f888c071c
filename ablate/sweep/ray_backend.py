"""Sweeps on a Ray cluster (``ablate sweep SWEEP.yaml --backend ray [--address ADDR]``): no W&B server needed.

The plan, the queue (grid, random, bayes), hyperband, ``metric.target``, progress, the report and W&B logging
are the local pool's (:func:`ablate.sweep.runner.execute`); only where a job runs changes: each job (a run, or a
seed array with ``--fuse on``) is a Ray task that runs it through :func:`ablate.sweep.job.run_job` (training, then
the sweep's ``evaluate:``) on the node Ray picks, with the resources it asks for (``--gpus-per-run``, fractional to
pack several small runs on one GPU; ``--cpus-per-run``).
Run directories must be on a filesystem every node sees (the sweep directory is passed as an absolute path).

When a node dies, Ray runs the task again elsewhere (``max_retries``); the run then resumes from its last
checkpoint (exactly: see :mod:`ablate.train.resume`), and the run's lock keeps two processes from ever training
it at once. Ray is an optional extra: ``pip install -e ".[ray]"``.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Callable

from ablate.errors import COMMAND_LINE, ConfigError
from ablate.exits import EXIT_FAILED, EXIT_LOCKED
from ablate.runs.files import log_path
from ablate.sweep.job import Ended, Job

RETRIES = 3  # how many times Ray runs a task again after its node died
LOCK_WAIT = 120.0  # seconds a task waits for a run another process holds before it leaves the run to it


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend", "ray", 'Ray installed: pip install -e ".[ray]" (or pip install ray)',
                          COMMAND_LINE) from None
    return ray


def _train_on_node(job: dict[str, Any], sweep_dir: str, cwd: str) -> list[Ended]:
    """What a Ray task does on its node: run one job there (:func:`ablate.sweep.job.run_job`), each process a fresh
    interpreter.

    A run still locked is waited for (up to :data:`LOCK_WAIT` seconds): after a node died, the process that
    trained the run there may take a moment to let go of it.
    """
    import ray

    from ablate.sweep.children import Children
    from ablate.sweep.job import run_job

    spec = Job.from_json(job)
    if not Path(sweep_dir).parent.is_dir() or not Path(cwd).is_dir():
        return [(EXIT_FAILED, f"{sweep_dir} (and {cwd}) not found on node {socket.gethostname()}: a Ray sweep needs "
                 "a filesystem every node sees, at the same path")] * len(spec.runs)
    for run in spec.runs:
        run_dir = Path(sweep_dir) / run.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(log_path(run_dir), "a") as log:  # which node each attempt ran on
            print(f"[ablate] ray: node {ray.get_runtime_context().get_node_id()} on {socket.gethostname()}", file=log)
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        ended = run_job(spec, Path(sweep_dir), env={}, children=Children(), cwd=Path(cwd), fresh=True)
        if all(code != EXIT_LOCKED for code, _ in ended) or time.monotonic() > deadline:
            return ended
        time.sleep(2.0)


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """Refuse a ``host:port`` address where nothing listens: ``ray.init`` would retry it for minutes.

    Raises:
        ConfigError: no connection to the address within ``timeout`` seconds.
    """
    host, _, port = (address or "").rpartition(":")
    if not host or "://" in address or not port.isdigit():  # none (a local cluster), "auto", ray:// clients
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError("--address", address, f"the address of a running Ray cluster (cannot connect: {exc})",
                          COMMAND_LINE) from None


class RayRunner:
    """Runs each job as a Ray task (:class:`ablate.sweep.runner.Backend`); :func:`ablate.sweep.launch.launch` uses
    its ``slots``, and :meth:`open` binds it to the sweep's folder."""

    job_name = "a Ray task"
    fuses = True

    def __init__(self, ray: Any, *, gpus_per_run: float | None, cpus_per_run: float | None):
        self.ray = ray
        self.gpus, self.cpus = gpus_per_run, cpus_per_run
        self.task = ray.remote(max_retries=RETRIES)(_train_on_node) if ray.is_initialized() else None
        self.sweep_dir: Path | None = None

    @classmethod
    def connect(cls, address: str | None, *, gpus_per_run: float | None = None, cpus_per_run: float | None = None,
                dry_run: bool = False) -> RayRunner:
        """Join the cluster at ``address`` (``RAY_ADDRESS`` when None; a new local one when neither is set).

        Raises:
            ConfigError: Ray is not installed, or there is no cluster at the address.
        """
        ray = _ray()
        if not dry_run and not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS") or None
            _check_reachable(address)
            try:
                ray.init(address=address, log_to_driver=False, include_dashboard=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError("--address", address or os.environ.get("RAY_ADDRESS"),
                                  f"the address of a running Ray cluster ({' '.join(str(exc).split())[:200]})",
                                  COMMAND_LINE) from None
        return cls(ray, gpus_per_run=gpus_per_run, cpus_per_run=cpus_per_run)

    def resources(self) -> dict[str, float]:
        """What each task asks Ray for: one CPU and no GPU unless told otherwise; a run on a GPU node gets a GPU."""
        gpus = self.gpus
        if gpus is None:
            gpus = 1.0 if self.ray.cluster_resources().get("GPU", 0) else 0.0
        return {"num_cpus": self.cpus if self.cpus is not None else 1.0, "num_gpus": gpus}

    def slots(self, pending: int | None) -> list[dict[str, str]]:
        """As many runs in flight as are pending: Ray queues what its nodes cannot hold yet (Ray sets each
        task's OMP_NUM_THREADS from its CPUs and CUDA_VISIBLE_DEVICES from its GPUs). An open-ended sweep
        (``pending`` None) keeps as many in flight as the cluster's CPUs hold."""
        if pending is None:
            cpus = self.ray.cluster_resources().get("CPU", 1)
            pending = int(cpus // (self.resources().get("num_cpus") or 1))
        return [{}] * max(1, pending)

    def open(self, sweep_dir: Path) -> RayRunner:
        """Bind to ``sweep_dir`` (an absolute path: the nodes see it at the same path)."""
        self.sweep_dir = Path(sweep_dir).resolve()
        return self

    def submit(self, jobs: list[tuple[Job, dict[str, str]]]) -> list[Callable[[], list[Ended]]]:
        """Start each job as a task; each wait blocks until Ray reports its end (after retries, if its node died)."""
        return [self._wait(self.task.options(**self.resources()).remote(job.to_json(), str(self.sweep_dir),
                                                                       os.getcwd()), len(job.runs))
                for job, _ in jobs]

    def _wait(self, ref: Any, runs: int) -> Callable[[], list[Ended]]:
        def wait() -> list[Ended]:
            try:
                return self.ray.get(ref)
            except Exception as exc:  # the task failed on every try (its nodes kept dying): record it, go on
                return [(EXIT_FAILED, f"ray: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")] * runs
        return wait

    def stop(self, signum: int) -> None:
        """The tasks go on on their nodes (the sweep process waits for them as it unwinds); a relaunch skips what
        they finished and resumes what they did not."""
