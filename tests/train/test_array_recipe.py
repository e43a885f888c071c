"""Seed arrays with the paper's recipe (configs/multi30k.yaml): each member keeps its last step checkpoints and logs
val/bleu at every validation, as its solo run does.

A 2-member array and the two solo runs of its seeds, on a slice of Multi30k (dropout 0, fp32), give each member:

- the step checkpoints of its solo run: the same files (``step-<step>.ckpt``, the last ``train.keep_checkpoints``),
  the same weights;
- the same ``ablate evaluate --average-last N`` BLEU;
- the same val/bleu at every validation, in metrics.csv, progress.json, result.json's final and (the member's) W&B
  run.

val/bleu is decoded member by member (:class:`ablate.train.validation_bleu.MemberBleu`): member k's weights are
copied into one solo model, which decodes as the solo run's model does. Not vmapped: greedy and beam search branch
on their tensors' values (a batch ends when its sentences have ended), which ``torch.func.vmap`` cannot batch, and
a copy of a tiny or a base model's weights costs far less than the decoding itself.

Adam's epsilon is 1e-6 here, not the paper's 1e-9: a key bias gets a zero gradient in exact arithmetic (softmax is
blind to it), and eps 1e-9 turns the float noise of that gradient, which differs between a fused and a solo step,
into full-size steps of either sign; at 1e-6 every weight of a member stays within 1e-4 of its solo run's.

And the array's step checkpoints survive a kill: an array killed with SIGKILL after its members wrote step
checkpoints past its own checkpoint, and relaunched, ends with the step checkpoints of the uninterrupted array.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import ablate
from ablate.evaluate import evaluate_run
from ablate.runs.files import read_json, read_metrics, read_result, step_checkpoints, step_of
from ablate.train.array import array_dir_of, train_array
from ablate.train.run import train
from tests.conftest import REPO, SMALL
from tests.runs.wandb_records import RunLog

STEPS, VAL_EVERY, EVERY, KEEP = 24, 8, 4, 3
KEPT = [f"step-{s}.ckpt" for s in (16, 20, 24)]  # the last KEEP multiples of EVERY
RECIPE = SMALL + [f"train.max_steps={STEPS}", f"train.val_every={VAL_EVERY}", f"train.checkpoint_every={EVERY}",
                  f"train.keep_checkpoints={KEEP}", "train.schedule_args.warmup=6", "train.schedule_args.scale=0.2",
                  "data.limit_train=1000", "data.limit_val=40", "data.vocab_size=300", "data.max_tokens=1024",
                  "trainer.precision=32-true", "trainer.threads=1"]
EXACT = ["model.dropout=0.0", "model.attention_dropout=0.0", "train.eps=1e-6"]
WEIGHTS = {"rtol": 1e-3, "atol": 1e-4}
# A step checkpoint's weights compared through what they compute: the loss on a fixed validation batch. A fused step
# sums in another order than a solo one; on some CPUs (AVX512 without BF16) Adam carries that, in the directions whose
# gradients are float noise (rare tokens' embedding rows), to weights 1e-2 apart by step 24, while the loss the weights
# give stays within 3e-4 (relative); from one kept step to the next the loss moves by more than 1e-3, so the tolerance
# still tells the steps apart (checked below).
LOSS = {"rtol": 1e-3, "atol": 0.0}


def _cfg(data: Path, cache: Path, out: Path, seed: int, *extra: str):
    return ablate.load_config(REPO / "configs/multi30k.yaml", [
        *RECIPE, *extra, f"data.path={data / 'multi30k'}", f"data.cache_dir={cache}", f"seed={seed}",
        f"output_dir={out}"])


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=False)["state_dict"]


def _loss(run_dir: Path, checkpoint: str) -> torch.Tensor:
    """The cross-entropy the run's ``checkpoints/<checkpoint>.ckpt`` weights give on a fixed validation batch."""
    from ablate.data import build_task
    from ablate.evaluate.load import load_run_model

    cfg, model, _ = load_run_model(run_dir, checkpoint=checkpoint, device="cpu")
    task = build_task(cfg)
    task.setup("fit")
    batch = next(iter(task.val_dataloader()))
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"})  # (B, T, V)
    labels = batch["labels"].flatten()  # (B * T,)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels, ignore_index=cfg.data.pad_id)


@pytest.fixture(scope="module")
def twins(shared_data, tmp_path_factory) -> list[tuple[Path, Path]]:
    """(member, solo run) of seeds 0 and 1: a 2-member array (each member logging to W&B, offline) and the solo
    runs, trained alike."""
    import wandb

    from tests.runs.test_wandb import _no_credentials

    tmp = tmp_path_factory.mktemp("recipe")
    with pytest.MonkeyPatch.context() as mp:
        _no_credentials(mp, tmp / "home")
        mp.chdir(tmp)
        train_array([_cfg(shared_data, tmp / "cache", tmp / f"array/runs/s{s}", s, *EXACT, "logger=wandb")
                     for s in (0, 1)])
        wandb.teardown()  # wandb-core writes a finished run's file in the background; wait for it
    for s in (0, 1):
        train(_cfg(shared_data, tmp / "cache", tmp / f"solo/s{s}", s, *EXACT))
    return [(tmp / f"array/runs/s{s}", tmp / f"solo/s{s}") for s in (0, 1)]


def test_the_array_takes_the_recipes_settings(twins):
    for member, _ in twins:
        result = read_result(member)
        assert result["status"] == "finished" and result["fused"]["members"] == 2
        cfg = OmegaConf.load(member / "config.yaml")
        assert cfg.data.task == "parallel_text" and cfg.train.val_bleu and cfg.train.keep_checkpoints == KEEP


def test_each_member_keeps_its_solo_runs_step_checkpoints(twins):
    for member, solo in twins:
        names = [p.name for p in step_checkpoints(member)]
        assert names == [p.name for p in step_checkpoints(solo)] == KEPT
        losses = {}
        for name in KEPT:
            mine, theirs = _weights(member / "checkpoints" / name), _weights(solo / "checkpoints" / name)
            assert set(mine) == set(theirs)
            stem = name.removesuffix(".ckpt")
            losses[name] = _loss(member, stem)
            torch.testing.assert_close(losses[name], _loss(solo, stem), **LOSS, msg=f"{member.name} {name}")
        # the tolerance tells steps apart: the step before is not the step
        for before, after in zip(KEPT, KEPT[1:]):
            assert not torch.allclose(losses[before], losses[after], **LOSS), (before, after)
        assert torch.load(member / "checkpoints" / KEPT[-1], weights_only=False)["global_step"] == STEPS


def test_each_member_averages_to_its_solo_runs_bleu(twins):
    """``ablate evaluate RUN --average-last 3`` (beam 4), on the validation split: the test split's 1,000 sentences
    would decode for minutes."""
    scores = []
    for member, solo in twins:
        mine, theirs = (evaluate_run(run, split="val", average_last=KEEP, max_len_b=10) for run in (member, solo))
        assert mine["decode"]["checkpoints"] == theirs["decode"]["checkpoints"] == KEPT
        assert mine["val/bleu"] == theirs["val/bleu"]
        scores.append(mine["val/bleu"])
    assert scores[0] != scores[1]  # two seeds, two models: a member scored as the other would be caught


def test_each_member_logs_its_solo_runs_val_bleu_at_every_validation(twins):
    histories = []
    for member, solo in twins:
        history = read_json(member / "progress.json")["history"]["val/bleu"]
        assert [s for s, _ in history] == [VAL_EVERY, 2 * VAL_EVERY, 3 * VAL_EVERY]
        assert history == read_json(solo / "progress.json")["history"]["val/bleu"]
        logged = [[int(r["step"]), r["val/bleu"]] for r in read_metrics(member) if "val/bleu" in r]
        assert logged == [[int(r["step"]), r["val/bleu"]] for r in read_metrics(solo) if "val/bleu" in r] == history
        assert read_result(member)["final"]["val/bleu"] == read_result(solo)["final"]["val/bleu"] == history[-1][1]
        # the first offline run is training's (ablate evaluate adds its scores to the run as a later one)
        trained = sorted(member.glob("wandb/offline-run-*/run-*.wandb"))[0]
        synced = [[int(h["step"]), h["val/bleu"]] for h in RunLog(trained).history if "val/bleu" in h]
        assert synced == history
        histories.append(history)
    assert histories[0] != histories[1] and any(v > 0 for h in histories for _, v in h)


def _configs(data: Path, tmp: Path, name: str) -> list:
    # dropout on: a resumed member draws the masks the uninterrupted one draws
    return [_cfg(data, tmp / "cache", tmp / f"{name}/runs/s{s}", s) for s in (0, 1)]


def _write_configs(data: Path, tmp: Path, name: str) -> list[str]:
    paths = []
    for s, cfg in enumerate(_configs(data, tmp, name)):
        path = tmp / f"{name}-s{s}.yaml"
        path.write_text(OmegaConf.to_yaml(cfg))
        paths.append(str(path))
    return paths


@pytest.mark.slow
def test_a_killed_array_ends_with_the_step_checkpoints_of_the_uninterrupted_one(shared_data, tmp_path):
    """Killed once a member wrote step 12, past the array's checkpoint of step 8 (or 16, if it got there first), and
    relaunched: member 0 ends with the uninterrupted array's step checkpoints, bit for bit. Member 1, stopped by a
    request as the relaunch begins, keeps those up to the checkpoint the relaunch resumed from, not the killed
    attempt's later ones (nor its half-written files)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    train_array(_configs(shared_data, tmp_path, "whole"))
    configs = _write_configs(shared_data, tmp_path, "killed")
    written = tmp_path / "killed/runs/s1/checkpoints/step-12.ckpt"  # the last member's: both are written
    child = subprocess.Popen([sys.executable, "-m", "ablate.cli", "train-array", *configs], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while child.poll() is None and not written.is_file():  # waits for the file, not a time
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    killed = _configs(shared_data, tmp_path, "killed")
    assert read_result(tmp_path / "killed/runs/s0")["status"] == "running"  # killed mid-way
    resumes_at = torch.load(array_dir_of(killed) / "last.ckpt", weights_only=False)["global_step"]
    stopped = tmp_path / "killed/runs/s1"
    assert step_of(step_checkpoints(stopped)[-1]) > resumes_at  # written after the checkpoint
    (stopped / "STOP").write_text("stopped as the relaunch begins\n")
    cut = stopped / "checkpoints/.step-28.ckpt.k1l2.tmp"  # what a write cut short leaves
    cut.write_bytes(b"cut")
    train_array(killed)  # relaunched
    assert not cut.exists() and read_result(stopped)["step"] == resumes_at + 1
    assert [p.name for p in step_checkpoints(stopped)] == [f"step-{s}.ckpt" for s in
                                                           range(EVERY, resumes_at + 1, EVERY)][-KEEP:]
    whole, resumed = tmp_path / "whole/runs/s0", tmp_path / "killed/runs/s0"
    assert read_result(resumed)["resumed_from"] and read_result(resumed)["status"] == "finished"
    assert [p.name for p in step_checkpoints(resumed)] == [p.name for p in step_checkpoints(whole)] == KEPT
    for name in KEPT:
        mine, theirs = _weights(resumed / "checkpoints" / name), _weights(whole / "checkpoints" / name)
        assert all(torch.equal(mine[k], theirs[k]) for k in theirs), name
    history = read_json(whole / "progress.json")["history"]
    assert read_json(resumed / "progress.json")["history"] == history and "val/bleu" in history


def test_a_member_that_fails_writes_no_more_step_checkpoints(tmp_path, monkeypatch):
    """Member 1's loss is NaN from step 10: it keeps steps 4 and 8, the other trains on and keeps its last three."""
    from ablate.train import fused_system
    from tests.train.test_array import _cfg as synthetic

    real = fused_system.FusedSystem._member_losses

    def poison(self, batch, smoothing, reduction):
        ce, *rest = real(self, batch, smoothing, reduction)
        if self.training and self.global_step >= 9:  # the 10th step
            ce = ce + torch.tensor([0.0, float("nan")])
        return (ce, *rest)

    monkeypatch.setattr(fused_system.FusedSystem, "_member_losses", poison)
    train_array([synthetic(tmp_path / f"runs/s{s}", s, f"train.keep_checkpoints={KEEP}",
                           f"train.checkpoint_every={EVERY}") for s in (0, 1)])
    failed, finished = tmp_path / "runs/s1", tmp_path / "runs/s0"
    # the 10th step, named as a solo run names it: the optimiser steps done (tests/train/test_one_life.py)
    assert read_result(failed)["status"] == "failed" and read_result(failed)["error"].endswith("at step 10")
    assert [p.name for p in step_checkpoints(failed)] == ["step-4.ckpt", "step-8.ckpt"]
    assert [p.name for p in step_checkpoints(finished)] == KEPT
