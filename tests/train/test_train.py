"""CPU smoke runs through ``ablate train``, and the contents of a run directory."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ablate
from ablate.runs.files import read_metrics
from ablate.train.run import RunFailed, train
from tests.conftest import REPO, TINY

FAST = ["train.max_steps=12", "train.val_every=6", "train.log_every=3", "trainer.enable_progress_bar=false"]


def _result(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())


def test_train_cli_on_the_embedded_task_writes_a_complete_run_dir(in_tmp):
    (in_tmp / "configs").symlink_to(REPO / "configs")
    out = subprocess.run([sys.executable, "-m", "ablate.cli", "train", *FAST, "output_dir=runs/smoke"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    run_dir = Path(out.stdout.strip().splitlines()[-1])  # the last line is the run directory
    assert run_dir == Path("runs/smoke")
    result = _result(run_dir)
    assert result["status"] == "finished" and result["step"] == 12
    assert result["parameters"] == ablate.count_parameters(
        ablate.build_model(ablate.load_config(REPO / "configs/default.yaml")))["total"]
    assert result["tokens_per_s"] > 0 and result["wall_time_s"] > 0
    assert {"val/loss", "val/ppl", "val/acc", "train/loss"} <= set(result["final"])
    assert result["best"]["val/loss"] <= result["final"]["val/loss"] + 1e-6
    assert (run_dir / "checkpoints" / "last.ckpt").is_file() and (run_dir / "checkpoints" / "best.ckpt").is_file()
    assert ablate.load_config(run_dir / "config.yaml").model.d_model == 64  # the resolved config reloads
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows if "val/loss" in r] == [5, 11]
    assert any("train/tokens_per_s" in r for r in rows) and any("lr-Adam" in r for r in rows)
    # W&B is on by default and, with no API key here, offline: its files are in the run directory.
    assert list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


def test_training_lowers_the_validation_loss(in_tmp):
    cfg = ablate.load_config(REPO / "configs/default.yaml", ["train.max_steps=60", "train.val_every=20", "logger=none",
                                                            "trainer.enable_progress_bar=false", "output_dir=run"])
    rows = read_metrics(train(cfg))
    val = [r["val/loss"] for r in rows if "val/loss" in r]
    assert len(val) == 3 and val[-1] < val[0] - 0.05


def test_a_killed_run_resumes_from_its_last_checkpoint(in_tmp):
    first = ablate.load_config(None, TINY + FAST + ["output_dir=run"])
    train(first)
    more = ablate.load_config(None, TINY + FAST + ["output_dir=run", "train.max_steps=18"])
    result = _result(train(more))
    assert result["status"] == "finished" and result["step"] == 18
    assert result["resumed_from"].endswith("last.ckpt")
    steps = [r["step"] for r in read_metrics(Path("run")) if "val/loss" in r]
    assert steps == [5, 11, 17]


def test_a_nan_loss_fails_the_run_and_records_why(in_tmp):
    cfg = ablate.load_config(None, TINY + FAST + ["output_dir=run", "train.schedule=constant", "train.lr=1e30",
                                                  "train.schedule_args.warmup=0", "train.log_every=1"])
    with pytest.raises(RunFailed, match="result.json"):
        train(cfg)
    result = _result(Path("run"))
    assert result["status"] == "failed" and ("inf" in result["error"] or "nan" in result["error"])


@pytest.mark.slow
def test_multi30k_slice_trains(in_tmp, shared_data):
    cfg = ablate.load_config(REPO / "configs/multi30k.yaml", FAST + [
        f"data.path={shared_data / 'multi30k'}", "data.limit_train=1000", "data.limit_val=64",
        "data.vocab_size=300", f"data.cache_dir={in_tmp / 'cache'}", "model.d_model=32", "model.n_heads=4",
        "model.d_ff=64", "model.n_layers=1", "data.max_tokens=1024", "output_dir=run", "train.schedule_args.warmup=6"])
    result = _result(train(cfg))
    assert result["status"] == "finished"
    assert result["final"]["val/loss"] < math.log(300)  # better than a uniform guess over the vocabulary


@pytest.mark.slow
def test_tinyshakespeare_slice_trains(in_tmp, shared_data):
    cfg = ablate.load_config(REPO / "configs/tinyshakespeare.yaml", FAST + [
        f"data.path={shared_data / 'tinyshakespeare' / 'input.txt'}", "data.limit_train=200", "data.limit_val=16",
        "data.vocab_size=300", f"data.cache_dir={in_tmp / 'cache'}", "model.d_model=32", "model.n_heads=4",
        "model.d_ff=64", "model.n_layers=1", "data.max_len=32", "data.batch_size=8", "output_dir=run",
        "train.schedule_args.warmup=6"])
    result = _result(train(cfg))
    assert result["status"] == "finished"
    assert result["final"]["val/loss"] < math.log(300)  # better than a uniform guess over the vocabulary


@pytest.mark.slow
def test_ddp_on_cpu_with_two_processes(in_tmp):
    """Lightning's DDP for a run that needs several devices, here two CPU processes."""
    (in_tmp / "configs").symlink_to(REPO / "configs")
    out = subprocess.run(
        [sys.executable, "-m", "ablate.cli", "train", *FAST, "trainer.accelerator=cpu", "trainer.devices=2",
         "trainer.strategy=ddp", "logger=none", "output_dir=ddp"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines() == ["ddp"]  # printed once, by rank 0
    assert "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2" in out.stderr
    result = _result(Path("ddp"))
    assert result["status"] == "finished" and result["step"] == 12


def test_the_last_k_checkpoints_are_kept_for_averaging(in_tmp):
    cfg = ablate.load_config(None, TINY + FAST + ["output_dir=run", "train.keep_checkpoints=2", "train.val_every=4"])
    train(cfg)
    kept = sorted(p.name for p in Path("run/checkpoints").glob("step-*.ckpt"))
    assert kept == ["step-12.ckpt", "step-8.ckpt"]  # named by optimiser steps done
    weights = torch.load(Path("run/checkpoints/step-12.ckpt"), weights_only=False)
    assert "state_dict" in weights and "optimizer_states" not in weights  # weights only: small
