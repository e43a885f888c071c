"""Exact resume and run-to-run determinism: the properties that make two runs comparable.

- A run killed with SIGKILL at a random step and relaunched ends bit-identical to the same run uninterrupted,
  for every kind of task (synthetic, parallel text with token batching, text LM), across epoch boundaries.
- The same seed twice gives the same run; another seed another.
- How often a run validates, and whether it decodes val/bleu, does not change what it trains.

Each comparison reads the final weights and optimiser state from the runs' own checkpoints, and the
validation losses from their result.json.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import ablate
from ablate.train.run import train
from tests.conftest import REPO, TINY

QUIET = ["logger=none", "trainer.enable_progress_bar=false", "train.log_every=5"]
# Small epochs (5 or so batches), so that runs cross epoch boundaries and a kill lands mid-epoch or on one.
SYNTHETIC = TINY + ["data.task_args={n_train: 320, n_val: 64}", "data.batch_size=64"]


def _tasks(shared: Path, cache: Path) -> dict[str, list[str]]:
    common = [f"data.cache_dir={cache}", "model.n_layers=1", "model.d_model=32", "model.n_heads=4", "model.d_ff=64"]
    return {
        "synthetic": [str(REPO / "configs/default.yaml"), *SYNTHETIC],
        "parallel_text": [str(REPO / "configs/multi30k.yaml"), *common, f"data.path={shared / 'multi30k'}",
                          "data.limit_train=600", "data.limit_val=40", "data.vocab_size=300", "data.max_tokens=600",
                          "train.val_bleu=false"],
        "text_lm": [str(REPO / "configs/tinyshakespeare.yaml"), *common,
                    f"data.path={shared / 'tinyshakespeare/input.txt'}", "data.limit_train=160", "data.limit_val=16",
                    "data.vocab_size=300", "data.max_len=32", "data.batch_size=32"],
    }


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


STEPS, EVERY = 84, 7  # checkpoints at steps 7, 14, ...: mostly in the middle of an epoch, some at its end
KILL_AFTER = (1, 5)  # checkpoints: killed at step 7 to 35 (and up to 0.2 s more), 49 steps or more before the end


def _command(args: list[str], run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "ablate.cli", "train", *args, *QUIET, f"train.max_steps={STEPS}",
            f"train.val_every={EVERY}", f"output_dir={run_dir}"]


def _final(run_dir: Path) -> tuple[dict[str, torch.Tensor], dict, dict]:
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "finished" and ckpt["global_step"] == STEPS, result
    return ckpt["state_dict"], ckpt["optimizer_states"][0]["state"], result


def _assert_same_run(a: Path, b: Path) -> None:
    weights_a, adam_a, result_a = _final(a)
    weights_b, adam_b, result_b = _final(b)
    assert weights_a.keys() == weights_b.keys()
    for key in weights_a:
        assert torch.equal(weights_a[key], weights_b[key]), key  # bit-identical, not close
    for p in adam_a:
        assert (torch.equal(adam_a[p]["exp_avg"], adam_b[p]["exp_avg"])
                and torch.equal(adam_a[p]["exp_avg_sq"], adam_b[p]["exp_avg_sq"]))
    assert result_a["final"]["val/loss"] == result_b["final"]["val/loss"]
    assert result_a["train_tokens"] == result_b["train_tokens"]


def _kill_after_checkpoints(cmd: list[str], run_dir: Path, n: int, delay: float) -> int:
    """Start the run, let ``n`` checkpoints be written, wait ``delay`` seconds more, SIGKILL it; the step resumed
    from."""
    last = run_dir / "checkpoints" / "last.ckpt"
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen, stamp, deadline = 0, None, time.time() + 240
    while seen < n and time.time() < deadline and proc.poll() is None:
        if last.is_file() and last.stat().st_mtime_ns != stamp:
            stamp, seen = last.stat().st_mtime_ns, seen + 1
        time.sleep(0.005)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((run_dir / "result.json").read_text())["status"] == "running"  # killed, not finished
    return torch.load(last, map_location="cpu", weights_only=False)["global_step"]


@pytest.mark.slow
@pytest.mark.parametrize("task", ["synthetic", "parallel_text", "text_lm"])
def test_a_run_killed_at_a_random_step_and_resumed_equals_the_uninterrupted_run(task, shared_data, tmp_path):
    args = _tasks(shared_data, tmp_path / "cache")[task]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    out = subprocess.run(_command(args, whole), env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rng = random.Random()  # a different kill point on every run of the suite; the assertion holds for any
    n, delay = rng.randint(*KILL_AFTER), rng.uniform(0.0, 0.2)
    resumed_at = _kill_after_checkpoints(_command(args, killed), killed, n, delay)
    assert 0 < resumed_at < STEPS, resumed_at
    again = subprocess.run(_command(args, killed), env=_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    result = json.loads((killed / "result.json").read_text())
    assert result["resumed_from"].endswith("last.ckpt") and result["resumed_exactly"] is True
    _assert_same_run(whole, killed)


def _train(tmp_path: Path, name: str, *overrides: str) -> Path:
    cfg = ablate.load_config(REPO / "configs/default.yaml",
                             SYNTHETIC + QUIET + ["train.max_steps=30", f"output_dir={tmp_path / name}", *overrides])
    return train(cfg)


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]


def test_same_seed_same_run_other_seed_other_run(tmp_path):
    a, b = _weights(_train(tmp_path, "a", "train.val_every=10")), _weights(_train(tmp_path, "b", "train.val_every=10"))
    c = _weights(_train(tmp_path, "c", "train.val_every=10", "seed=1"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_how_often_a_run_validates_does_not_change_its_trajectory(tmp_path):
    """Validation (its loader, its forward passes) draws nothing from the training run's random numbers."""
    rare = _weights(_train(tmp_path, "rare", "train.val_every=30"))
    often = _weights(_train(tmp_path, "often", "train.val_every=3"))
    assert all(torch.equal(rare[k], often[k]) for k in rare)


def test_random_numbers_drawn_during_validation_are_given_back(tmp_path, monkeypatch):
    """Even when something in validation draws from the global generators (a user's component, a callback),
    training goes on with the random states it had: they are restored when validation ends."""
    from ablate.train.system import TransformerSystem

    step = TransformerSystem.validation_step

    def drawing_step(self, batch, batch_idx):
        torch.rand(7), __import__("numpy").random.rand(3), random.random()
        return step(self, batch, batch_idx)

    monkeypatch.setattr(TransformerSystem, "validation_step", drawing_step)
    rare = _weights(_train(tmp_path, "rare", "train.val_every=30"))
    often = _weights(_train(tmp_path, "often", "train.val_every=3"))
    assert all(torch.equal(rare[k], often[k]) for k in rare)


@pytest.mark.slow
def test_decoding_val_bleu_does_not_change_the_trajectory(shared_data, tmp_path):
    args = _tasks(shared_data, tmp_path / "cache")["parallel_text"]
    runs = {}
    for bleu in ("true", "false"):
        cfg = ablate.load_config(args[0], args[1:-1] + QUIET + [f"train.val_bleu={bleu}", "train.max_steps=20",
                                                                "train.val_every=5", f"output_dir={tmp_path / bleu}"])
        runs[bleu] = train(cfg)
    assert "val/bleu" in json.loads((runs["true"] / "result.json").read_text())["final"]
    a, b = _weights(runs["true"]), _weights(runs["false"])
    assert all(torch.equal(a[k], b[k]) for k in a)
