"""CPU smoke runs through ``ablate train``, and the contents of a run directory."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ablate
from ablate.errors import ConfigError
from ablate.runs.files import read_metrics, step_checkpoints
from ablate.runs.metrics import known
from ablate.train.run import RunFailed, train
from tests.conftest import REPO, TINY, result_of

FAST = ["train.max_steps=12", "train.val_every=6", "train.log_every=3", "trainer.enable_progress_bar=false"]


def test_train_cli_on_the_embedded_task_writes_a_complete_run_dir(in_tmp):
    (in_tmp / "configs").symlink_to(REPO / "configs")
    out = subprocess.run([sys.executable, "-m", "ablate.cli", "train", *FAST, "output_dir=runs/smoke"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    run_dir = Path(out.stdout.strip().splitlines()[-1])  # the last line is the run directory
    assert run_dir == Path("runs/smoke")
    result = result_of(run_dir)
    assert result["status"] == "finished" and result["step"] == 12
    assert result["parameters"] == ablate.count_parameters(
        ablate.build_model(ablate.load_config(REPO / "configs/default.yaml")))["total"]
    assert result["tokens_per_s"] > 0 and result["wall_time_s"] > 0
    assert {"val/loss", "val/ppl", "val/acc", "train/loss"} <= set(result["final"])
    assert result["best"]["val/loss"] <= result["final"]["val/loss"] + 1e-6
    assert (run_dir / "checkpoints" / "last.ckpt").is_file() and (run_dir / "checkpoints" / "best.ckpt").is_file()
    assert ablate.load_config(run_dir / "config.yaml").model.d_model == 64  # the resolved config reloads
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows if "val/loss" in r] == [6, 12]  # val_every=6: after 6 and 12 steps
    assert any("train/tokens_per_s" in r for r in rows) and any("train/lr" in r for r in rows)
    logged = {k for r in rows for k in r if k not in ("step", "epoch")} | set(result["final"])
    assert all(known(k) for k in logged), logged  # a sweep's metric may name exactly what runs log
    # W&B is on by default and, with no API key here, offline: its files are in the run directory.
    assert list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


def test_training_lowers_the_validation_loss(in_tmp):
    cfg = ablate.load_config(REPO / "configs/default.yaml", ["train.max_steps=60", "train.val_every=20", "logger=none",
                                                            "trainer.enable_progress_bar=false", "output_dir=run"])
    rows = read_metrics(train(cfg))
    val = [r["val/loss"] for r in rows if "val/loss" in r]
    assert len(val) == 3 and val[-1] < val[0] - 0.05


@pytest.mark.parametrize("steps, every, validated", [(7, 100, [7]), (13, 5, [5, 10, 13]), (10, 5, [5, 10])])
def test_a_run_validates_at_its_last_step_whatever_val_every(in_tmp, steps, every, validated):
    """A run shorter than val_every, or of steps not a multiple of it, still ends scored with a best.ckpt; a last step
    on the schedule is validated once (metrics.csv's step: the steps done, as result.json's)."""
    cfg = ablate.load_config(REPO / "configs/default.yaml", [*TINY, f"train.max_steps={steps}",
                                                            f"train.val_every={every}", "logger=none",
                                                            "trainer.enable_progress_bar=false", "output_dir=run"])
    run_dir = train(cfg)  # the tiny model: the schedule of validations does not depend on the model's size
    result = result_of(run_dir)
    assert [r["step"] for r in read_metrics(run_dir) if "val/loss" in r] == validated
    assert result["status"] == "finished" and result["step"] == steps and "val/loss" in result["final"]
    assert result["best"]["val/loss"] <= result["final"]["val/loss"] + 1e-6
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()


def test_a_run_directory_belongs_to_one_config(in_tmp):
    """Resuming a run directory under another config would relabel steps trained one way as trained another: it is
    refused, naming the keys, and nothing in the directory changes. (Resuming under its own config:
    tests/train/test_resume.py.)"""
    first = ablate.load_config(None, TINY + FAST + ["output_dir=run"])
    train(first)
    files = {p: p.read_bytes() for p in Path("run").rglob("*") if p.is_file() and ".lock" not in p.name}
    other = ablate.load_config(None, TINY + FAST + ["output_dir=run", "model.dropout=0.3", "train.label_smoothing=0.0",
                                                    "train.max_steps=18"])
    with pytest.raises(ConfigError, match=re.escape("model.dropout: 0.1 -> 0.3; train.label_smoothing: 0.1 -> 0.0; "
                                                    "train.max_steps: 12 -> 18")):
        train(other)
    assert {p: p.read_bytes() for p in Path("run").rglob("*") if p.is_file() and ".lock" not in p.name} == files
    assert train(first) == Path("run") and result_of(Path("run"))["step"] == 12  # its own config: nothing to do


def test_a_loss_that_turns_nan_between_checks_fails_the_run_with_its_step(in_tmp):
    """Read every 1000 steps, a 6-step run whose loss goes NaN is still failed, at the step it went bad."""
    cfg = ablate.load_config(None, TINY + FAST + ["output_dir=run", "train.schedule=constant", "train.lr=1e30",
                                                  "train.schedule_args.warmup=0", "train.log_every=1000",
                                                  "train.max_steps=6", "train.val_every=1000"])
    Path("run").mkdir()  # a folder that was there: marked failed (one train() made would be removed)
    with pytest.raises(RunFailed):
        train(cfg)
    result = result_of(Path("run"))
    assert result["status"] == "failed" and re.fullmatch(r"FloatingPointError: train/loss is (nan|inf) at step \d",
                                                         result["error"])
    json.loads((Path("run") / "result.json").read_text(), parse_constant=_strict)  # strict JSON, NaN or not


def _strict(token: str) -> None:
    raise ValueError(f"{token} is not JSON")


def test_a_huge_diverged_loss_is_recorded_not_lost(in_tmp, monkeypatch):
    """A best val loss past exp's range (~709 nats) used to raise OverflowError and leave result.json 'running'."""
    from ablate.runs.metrics import perplexity

    assert perplexity(800.0) == math.inf and perplexity(1.0) == pytest.approx(math.e)
    from ablate.runs.files import read_result, write_json

    write_json(Path("r.json"), {"best": {"val/loss": 800.0, "val/ppl": math.inf}, "final": {"val/loss": math.nan}})
    text = Path("r.json").read_text()
    assert json.loads(text, parse_constant=_strict)["best"]["val/ppl"] == "Infinity"
    Path("run").mkdir()
    Path("r.json").rename(Path("run") / "result.json")
    back = read_result(Path("run"))
    assert back["best"]["val/ppl"] == math.inf and math.isnan(back["final"]["val/loss"])


LOUD = '''\
from ablate import register
from ablate.components.embedding import Embeddings, TiedGenerator, TokenEmbedding


class Loud(TiedGenerator):
    def forward(self, x):
        return super().forward(x) * 1e4


@register("embedding", "test_loud")
def loud(*, vocab_size: int, d_model: int) -> Embeddings:
    """Tied embeddings whose logits are 10^4 times too loud (a test of losses past exp's range)."""
    table = TokenEmbedding(vocab_size, d_model, scale=True)
    return Embeddings(table, table, Loud(table))
'''


def test_a_run_whose_loss_is_past_exp_s_range_ends_with_its_result_recorded(in_tmp, monkeypatch):
    """Through the training loop: a val loss of thousands of nats is a (terrible) result, its PPL infinite, written
    as strict JSON, the run finished."""
    from ablate import registry
    from ablate.runs.files import read_result

    Path("loud_logits.py").write_text(LOUD)
    monkeypatch.syspath_prepend(str(in_tmp))
    try:
        cfg = ablate.load_config(None, TINY + FAST + ["output_dir=run", "model.embedding=test_loud"],
                                 imports=["loud_logits"])
        train(cfg)
    finally:
        if "test_loud" in registry.names("embedding"):
            registry.unregister("embedding", "test_loud")
    result = read_result(Path("run"))
    assert result["status"] == "finished" and result["final"]["val/loss"] > 709
    assert result["final"]["val/ppl"] == math.inf == result["best"]["val/ppl"]
    text = (Path("run") / "result.json").read_text()
    assert json.loads(text, parse_constant=_strict)["best"]["val/ppl"] == "Infinity"


def test_a_nan_loss_fails_the_run_and_records_why(in_tmp):
    cfg = ablate.load_config(None, TINY + FAST + ["output_dir=run", "train.schedule=constant", "train.lr=1e30",
                                                  "train.schedule_args.warmup=0", "train.log_every=1"])
    Path("run").mkdir()  # a folder that was there: marked failed (one train() made would be removed)
    with pytest.raises(RunFailed, match="result.json"):
        train(cfg)
    result = result_of(Path("run"))
    assert result["status"] == "failed" and ("inf" in result["error"] or "nan" in result["error"])


@pytest.mark.slow
def test_multi30k_slice_trains(in_tmp, shared_data):
    cfg = ablate.load_config(REPO / "configs/multi30k.yaml", FAST + [
        f"data.path={shared_data / 'multi30k'}", "data.limit_train=1000", "data.limit_val=64",
        "data.vocab_size=300", f"data.cache_dir={in_tmp / 'cache'}", "model.d_model=32", "model.n_heads=4",
        "model.d_ff=64", "model.n_layers=1", "data.max_tokens=1024", "output_dir=run", "train.schedule_args.warmup=6"])
    result = result_of(train(cfg))
    assert result["status"] == "finished"
    assert result["final"]["val/loss"] < math.log(300)  # better than a uniform guess over the vocabulary


@pytest.mark.slow
def test_tinyshakespeare_slice_trains(in_tmp, shared_data):
    cfg = ablate.load_config(REPO / "configs/tinyshakespeare.yaml", FAST + [
        f"data.path={shared_data / 'tinyshakespeare' / 'input.txt'}", "data.limit_train=200", "data.limit_val=16",
        "data.vocab_size=300", f"data.cache_dir={in_tmp / 'cache'}", "model.d_model=32", "model.n_heads=4",
        "model.d_ff=64", "model.n_layers=1", "data.max_len=32", "data.batch_size=8", "output_dir=run",
        "train.schedule_args.warmup=6"])
    result = result_of(train(cfg))
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
    result = result_of(Path("ddp"))
    assert result["status"] == "finished" and result["step"] == 12


def test_the_last_k_checkpoints_are_kept_for_averaging(in_tmp):
    cfg = ablate.load_config(None, TINY + FAST + ["output_dir=run", "train.keep_checkpoints=2", "train.val_every=4"])
    train(cfg)
    kept = sorted(p.name for p in Path("run/checkpoints").glob("step-*.ckpt"))
    assert kept == ["step-12.ckpt", "step-8.ckpt"]  # named by optimiser steps done
    weights = torch.load(Path("run/checkpoints/step-12.ckpt"), weights_only=False)
    assert "state_dict" in weights and "optimizer_states" not in weights  # weights only: small


def test_a_step_checkpoint_at_the_end_of_an_epoch_is_kept_at_its_own_step(in_tmp):
    """5 batches an epoch, a step checkpoint every 5 steps: each falls on an epoch's last batch, which Lightning
    left to itself puts off to the next validation (it kept steps 8, 16 and 24, validations every 8)."""
    cfg = ablate.load_config(REPO / "configs/default.yaml", [
        *TINY, "trainer.enable_progress_bar=false", "train.max_steps=24", "train.val_every=8", "train.log_every=4",
        "data.task_args={n_train: 320, n_val: 64}", "data.batch_size=64", "train.keep_checkpoints=10",
        "train.checkpoint_every=5", "output_dir=run"])
    train(cfg)
    assert [p.name for p in step_checkpoints(Path("run"))] == [f"step-{s}.ckpt" for s in (5, 10, 15, 20)]


def test_a_components_auxiliary_loss_is_logged_apart_in_a_real_run(in_tmp):
    """The Switch FFN's load balance (and a z-loss) through a real run: logged as train/aux/* and val/aux/* at the
    steps the run logs and validates, finite and positive; val/loss stays the token loss and val/ppl its exp
    (that the objective adds them and val/loss does not: tests/components/test_moe.py, on a real step)."""
    cfg = ablate.load_config(REPO / "configs/default.yaml", [*TINY, *FAST, "model.ffn=switch",
                                                            "model.ffn_args.z_weight=0.001", "output_dir=run"])
    run_dir = train(cfg)
    rows, result = read_metrics(run_dir), result_of(run_dir)
    assert result["status"] == "finished"
    for name in ("load_balance", "router_z"):
        train_values = [r[f"train/aux/{name}"] for r in rows if f"train/aux/{name}" in r]
        val_values = [r[f"val/aux/{name}"] for r in rows if f"val/aux/{name}" in r]
        assert len(train_values) == 4 and len(val_values) == 2, (name, rows[-1])  # log_every 3, val_every 6
        assert all(math.isfinite(v) and v > 0 for v in train_values + val_values)
    assert math.isclose(result["final"]["val/ppl"], math.exp(result["final"]["val/loss"]), rel_tol=1e-6)
