"""`ablate train` keeps wandb's notes off the terminal: an offline run's lines on where its data is and how to see or
sync it go to the run's train.log, kept with the run, and the run still logs to W&B. The real command, in a child
process, with W&B offline (no key, no network)."""

from __future__ import annotations

import os
import subprocess
import sys

from ablate.runs.wandb_offline import offline_runs
from tests.conftest import REPO, TINY


def test_ablate_train_prints_no_wandb_lines_and_its_log_keeps_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    overrides = [o for o in TINY if not o.startswith("logger=")] + [
        "logger=wandb", "wandb.mode=offline", "train.max_steps=4", "train.val_every=2",
        f"output_dir={tmp_path / 'runs'}"]
    done = subprocess.run([sys.executable, "-m", "ablate.cli", "train", str(REPO / "configs" / "default.yaml"),
                           *overrides], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("wandb:")], done.stderr
    run_dir, = (path.parent for path in (tmp_path / "runs").rglob("config.yaml"))
    log = (run_dir / "train.log").read_text()
    assert "wandb: Run data is saved locally" in log, log  # wandb's note, kept with the run
    assert offline_runs([run_dir / "wandb"])  # and the run still went to W&B
