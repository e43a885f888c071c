"""What the sweep tests share: a tiny sweep file, the CLI in this process (for sweeps that kill nothing: their runs
still train in processes of their own, forked from one warm server for the whole session) or in a child process (for
sweeps that are killed, resumed or run beside another launcher), readers of a sweep folder's plan and runs, and a real
single-node Slurm cluster for the Slurm tests (``slurm_cluster``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY, ablate_here  # noqa: F401  (ablate_here: the sweep tests' in-process CLI)
from tests.sweep.slurm_cluster import SlurmCluster, missing as slurm_missing, start as start_slurm

FAST = TINY + ["train.max_steps=8", "train.val_every=4", "train.log_every=2", "trainer.enable_progress_bar=false",
               "logger=none"]


# Rows a sequential design decides at different looks: a model that barely trains (decided at once) and a small
# change of dropout (the seeds decide it, or not)
DECIDING_ROWS = """
    - {name: base}
    - {name: stalled, train.schedule_args.scale: 0.001}
    - {name: dropout, model.dropout: 0.12}
"""


def write_sweep(tmp_path: Path, text: str) -> Path:
    """``text``, dedented, as ``tmp_path/sweep.yaml``."""
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def sweep_file(tmp: Path, rows: str, name: str = "t") -> Path:
    """A sweep file of ``rows`` (YAML list items) over the tiny FAST config, in ``tmp``."""
    overrides = ", ".join(FAST)
    text = f"""
        name: {name}
        base: {{config: {REPO / 'configs' / 'default.yaml'}, overrides: [{overrides}]}}
        rows:
{textwrap.indent(textwrap.dedent(rows).strip(), ' ' * 10)}
    """
    path = tmp / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def ablate_cli(*args: str, cwd: Path, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    """``ablate ARGS`` in a child process with one thread (``background=True``: not waited for)."""
    cmd = [sys.executable, "-m", "ablate.cli", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if kw.pop("background", False):
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def plan_of(sweep_dir: Path) -> dict:
    """The sweep folder's plan.json."""
    return json.loads((sweep_dir / "plan.json").read_text())


def run_statuses(sweep_dir: Path) -> list[str]:
    """Each planned run's status, in plan order (``missing`` before it starts)."""
    out = []
    for run in plan_of(sweep_dir)["runs"]:
        path = sweep_dir / run["run_dir"] / "result.json"
        out.append(json.loads(path.read_text())["status"] if path.is_file() else "missing")
    return out


def run_attempts(sweep_dir: Path) -> list[int]:
    """How many times each run was trained (each attempt writes one logs/version_k folder)."""
    return [len(list((sweep_dir / r["run_dir"] / "logs").glob("version_*"))) for r in plan_of(sweep_dir)["runs"]]


@pytest.fixture(scope="module")
def slurm_cluster():
    """A single-node Slurm cluster (``tests/sweep/slurm_cluster.py``) for the module's tests, skipped when Slurm is
    not installed. While it runs, this process's ``SLURM_CONF`` (and ``PATH``, if it lacked /usr/sbin) point at it,
    so a plain ``sbatch`` or submitit reaches it; both are restored afterwards."""
    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    cluster: SlurmCluster = start_slurm()
    saved = {name: os.environ.get(name) for name in cluster.env}
    os.environ.update(cluster.env)
    try:
        yield cluster
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        cluster.stop()
