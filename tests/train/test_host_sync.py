"""A training run reads its loss back to the host only when it logs (every ``train.log_every`` steps), not at every
step; ``train/loss`` is then the mean over the steps since the last log, and a resumed run logs the same means."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import torch

import ablate
from ablate.runs.files import read_metrics
from ablate.train import callbacks
from ablate.train.run import train
from tests.conftest import REPO

SYNCS = ("item", "__float__", "__int__", "__bool__", "tolist")  # the ways a tensor becomes a Python value


def _config(tmp: Path, name: str, steps: int, *overrides: str):
    return ablate.load_config(REPO / "configs/default.yaml", [
        f"train.max_steps={steps}", "train.val_every=1000", "logger=none", "trainer.accelerator=cpu",
        "trainer.precision=32-true", "train.keep_checkpoints=0", "data.task_args.n_val=64", f"output_dir={tmp / name}",
        *overrides])


def _syncs_during(monkeypatch, run) -> int:
    counts: collections.Counter = collections.Counter()
    for name in SYNCS:
        def counted(self, *args, _name=name, _inner=getattr(torch.Tensor, name), **kwargs):
            counts[_name] += 1
            return _inner(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    run()
    monkeypatch.undo()
    return sum(counts.values())


def test_twenty_more_steps_read_tensors_back_only_at_the_two_more_logs(tmp_path, monkeypatch):
    every = 10  # the progress bar on (the default), as it was when it read the loss at every step
    syncs = {n: _syncs_during(monkeypatch, lambda n=n: train(_config(tmp_path, f"s{n}", n, f"train.log_every={every}")))
             for n in (10, 30)}
    logs = (30 - 10) // every
    # Per log: the CSV logger's two values, the bar's loss, TokenThroughput's and FiniteLoss's counts (5); the old
    # prog_bar=True loss was converted three times a step (60 here).
    assert syncs[30] - syncs[10] <= 6 * logs < 30 - 10


def _losses(run_dir: Path) -> dict[int, float]:
    return {int(r["step"]): r["train/loss"] for r in read_metrics(run_dir) if r.get("train/loss") is not None}


def test_train_loss_is_the_mean_of_the_step_losses_since_the_last_log(tmp_path):
    each = _losses(train(_config(tmp_path, "each", 10, "train.log_every=1")))
    windows = _losses(train(_config(tmp_path, "windows", 10, "train.log_every=4")))
    assert sorted(each) == list(range(1, 11)) and sorted(windows) == [4, 8, 10]  # every 4 steps, and the last
    for last, first in ((4, 1), (8, 5), (10, 9)):
        mean = sum(each[s] for s in range(first, last + 1)) / (last + 1 - first)
        assert windows[last] == pytest.approx(mean, rel=1e-6)


def test_a_run_resumed_inside_a_logging_window_logs_the_means_of_the_uninterrupted_run(tmp_path, monkeypatch):
    overrides = ("train.log_every=4", "train.val_every=3")  # last.ckpt at step 6: inside the window of steps 4-7
    whole = _losses(train(_config(tmp_path, "whole", 10, *overrides)))
    hook = callbacks.StopRequest.on_train_batch_end

    def interrupt_at_step_7(self, trainer, *args):
        if trainer.global_step == 7:
            raise KeyboardInterrupt
        return hook(self, trainer, *args)

    monkeypatch.setattr(callbacks.StopRequest, "on_train_batch_end", interrupt_at_step_7)
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        train(_config(tmp_path, "resumed", 10, *overrides))
    monkeypatch.undo()
    resumed = _losses(train(_config(tmp_path, "resumed", 10, *overrides)))
    assert whole[8] == resumed[8] and whole[10] == resumed[10]  # the windows ending after 8 and 10 steps
