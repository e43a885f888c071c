"""The Ray backend on a real two-node Ray cluster started on this machine (loopback only), and without Ray.

The cluster is ``ray.cluster_utils.Cluster`` in a helper process (``ray_cluster.py``): it starts, and at the
end stops, only its own processes, and leaves pytest's process alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sweep.conftest import plan_of, run_attempts, run_statuses, sweep_file

# One worker at a time starts a Ray cluster (under pytest-xdist): two clusters at once on 2 cores took 5 minutes.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray_cluster")]

# The driver (ablate sweep) must reach the cluster on 127.0.0.1: Ray otherwise swaps a loopback address for
# this machine's network address, which a sandbox may not route.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@dataclass
class RayCluster:
    """Two nodes of one CPU each (at most one run trains on each, so a sweep has to use both), run by
    ``tests/sweep/ray_cluster.py`` in its own process."""

    proc: subprocess.Popen
    address: str
    head: str  # node ids
    worker: str

    def remove_worker(self) -> None:
        self.proc.stdin.write("remove-worker\n")
        self.proc.stdin.flush()
        while (line := self.proc.stdout.readline()) and line.strip() != "removed":
            pass
        assert line, "the Ray cluster helper ended before removing the node"


@pytest.fixture
def cluster():
    pytest.importorskip("ray.cluster_utils")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("ray_cluster.py"))],
                            env={**os.environ, **LOOPBACK},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    group, on_sigterm = os.getpgrp(), signal.getsignal(signal.SIGTERM)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("{"):  # anything Ray prints before the cluster is up
            line = proc.stdout.readline()
        assert line, "the Ray cluster did not start"
        info = json.loads(line)
        yield RayCluster(proc, info["address"], info["head"], info["worker"])
        assert (os.getpgrp(), signal.getsignal(signal.SIGTERM)) == (group, on_sigterm)  # pytest left alone
    finally:
        proc.stdin.close()  # the helper shuts its cluster down
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()


def _ray_sweep(path: Path, address: str, cwd: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(path), "--backend", "ray", "--address", address,
           "--cpus-per-run", "1"]
    return subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **LOOPBACK, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # whatever signals the driver's group leaves pytest alone


def _finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[str, str]:
    """The driver's output once it ends; killed (with its session) when it does not end in time."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise


def _nodes(sweep_dir: Path, run: dict) -> list[str]:
    """The Ray node of each attempt at a run, as its train.log records them."""
    log = (sweep_dir / run["run_dir"] / "train.log").read_text()
    return [line.split()[3] for line in log.splitlines() if line.startswith("[ablate] ray: node")]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


ROWS = """
    - {name: a}
    - {name: b, model.n_heads: 2}
    - {name: c, model.ffn: gelu}
    - {name: d, model.norm_position: pre}
"""


def test_a_sweep_across_two_nodes_ends_with_exactly_the_planned_runs(cluster, tmp_path):
    path = sweep_file(tmp_path, ROWS)
    proc = _ray_sweep(path, cluster.address, tmp_path)
    out, err = _finish(proc)
    sweep_dir = tmp_path / "sweeps" / "t"
    assert proc.returncode == 0, err[-3000:]
    assert run_statuses(sweep_dir) == ["finished"] * 4 and run_attempts(sweep_dir) == [1, 1, 1, 1]
    nodes = {n for run in plan_of(sweep_dir)["runs"] for n in _nodes(sweep_dir, run)}
    assert nodes == {cluster.head, cluster.worker}  # both nodes trained runs
    assert sorted(p.name for p in (sweep_dir / "runs").iterdir()) == sorted(r["id"] for r in plan_of(sweep_dir)["runs"])
    assert out.strip().splitlines()[-1] == str(sweep_dir)  # the sweep directory, absolute: nodes share it
    assert (sweep_dir / "report" / "report.html").is_file()


def test_a_node_that_dies_mid_run_costs_no_run_and_trains_none_twice(cluster, tmp_path):
    """Remove the worker node while it trains a run: Ray runs the task again on the head, which resumes the run
    from its last checkpoint; the runs that had finished are not touched."""
    path = sweep_file(tmp_path, ROWS.replace("}", ", train.max_steps: 120, train.val_every: 10}"))
    proc = _ray_sweep(path, cluster.address, tmp_path)
    sweep_dir = tmp_path / "sweeps" / "t"
    victim, deadline = None, time.time() + 400
    while victim is None and time.time() < deadline:  # a run on the worker node with a checkpoint
        time.sleep(0.5)
        runs = plan_of(sweep_dir)["runs"] if (sweep_dir / "plan.json").is_file() else []
        for run in runs:
            run_dir = sweep_dir / run["run_dir"]
            on_worker = (run_dir / "train.log").is_file() and _nodes(sweep_dir, run)[-1:] == [cluster.worker]
            if on_worker and (run_dir / "checkpoints" / "last.ckpt").is_file():
                victim = run
    assert victim is not None, "no run on the worker node reached a checkpoint"
    finished = {r["id"]: _digest(sweep_dir / r["run_dir"] / "result.json") for r in runs
                if (sweep_dir / r["run_dir"] / "result.json").is_file()
                and json.loads((sweep_dir / r["run_dir"] / "result.json").read_text())["status"] == "finished"}
    cluster.remove_worker()
    out, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]

    runs = plan_of(sweep_dir)["runs"]
    assert run_statuses(sweep_dir) == ["finished"] * 4
    results = {r["id"]: json.loads((sweep_dir / r["run_dir"] / "result.json").read_text()) for r in runs}
    assert all(r["step"] == 120 for r in results.values())
    for run_id, digest in finished.items():  # finished results untouched
        assert _digest(sweep_dir / next(r for r in runs if r["id"] == run_id)["run_dir"] / "result.json") == digest
    # The victim: one attempt on the worker, then one on the head, resuming from its checkpoint, exactly.
    tries = _nodes(sweep_dir, victim)
    assert tries[0] == cluster.worker and set(tries[1:]) == {cluster.head}
    assert results[victim["id"]]["resumed_from"] and results[victim["id"]]["resumed_exactly"]
    # No run trained twice: every other run had one attempt; the victim two (the killed one, the resumed one).
    attempts = dict(zip((r["id"] for r in runs), run_attempts(sweep_dir)))
    assert attempts.pop(victim["id"]) == 2 and set(attempts.values()) == {1}


def test_without_ray_the_backend_says_how_to_install_it(tmp_path):
    fake = tmp_path / "site" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    path = sweep_file(tmp_path, "- {name: a}")
    env = {**os.environ, "PYTHONPATH": f"{fake.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", str(path), "--backend", "ray"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert 'pip install -e ".[ray]"' in out.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "sweeps").exists()  # nothing written


def test_an_address_where_no_cluster_listens_is_one_line_and_exit_2(tmp_path):
    """Not minutes of ray.init retrying: a connection check first, one line, nothing written."""
    pytest.importorskip("ray")
    address = "127.0.0.1:1"  # nothing listens on port 1
    path = sweep_file(tmp_path, "- {name: a}")
    out = subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", str(path), "--backend", "ray",
                          "--address", address],
                         cwd=tmp_path, env={**os.environ, **LOOPBACK}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].endswith(
        f"--address='{address}' is not allowed; expected the address of a running Ray cluster "
        "(cannot connect: [Errno 111] Connection refused)")
    assert not (tmp_path / "sweeps").exists()
