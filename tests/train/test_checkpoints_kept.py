"""What a run's two checkpoints hold, for a solo run and for a seed array's member alike: ``last.ckpt`` the weights of
its last validation (what ``ablate evaluate --checkpoint last`` reads, and a solo run resumes from), ``best.ckpt`` those
of its lowest val/loss, the earlier step on a tie (:class:`ablate.train.life.BestWeights`).

Lightning's ModelCheckpoint with a monitor writes ``save_last`` only at a validation that improved: a run whose val
loss had stopped improving ended with an older step's last.ckpt. Here the learning rate is 1e-30, so the weights never
move and every validation scores the very same loss: the best is the first validation, the last is the last step.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from ablate.config import load_config
from ablate.train.array import train_array
from ablate.train.callbacks import Best
from ablate.train.run import train
from tests.conftest import REPO, TINY, result_of

STEPS, EVERY = 40, 10
FROZEN = [*TINY, "trainer.enable_progress_bar=false", "trainer.precision=32-true", "trainer.threads=1",
          "model.dropout=0.0", "model.attention_dropout=0.0", f"train.max_steps={STEPS}", f"train.val_every={EVERY}",
          "train.schedule=constant", "train.schedule_args={warmup: 0}", "train.lr=1e-30"]


def _step(path) -> int:
    return torch.load(path, map_location="cpu", weights_only=False)["global_step"]


@pytest.mark.parametrize("kind", ["solo", "array"])
def test_last_ckpt_is_the_last_validation_and_best_ckpt_the_first_of_equal_ones(kind, tmp_path):
    cfgs = [load_config(REPO / "configs/default.yaml", [*FROZEN, f"seed={s}", f"output_dir={tmp_path / f's{s}'}"])
            for s in (0, 1)]
    run_dir = train(cfgs[0]) if kind == "solo" else train_array(cfgs)[0]
    result = result_of(run_dir)
    losses = json.loads((run_dir / "progress.json").read_text())["history"]["val/loss"]
    assert [s for s, _ in losses] == list(range(EVERY, STEPS + 1, EVERY))
    assert len({v for _, v in losses}) == 1, losses  # the premise: the weights did not move
    assert result["status"] == "finished" and result["step"] == STEPS
    assert _step(run_dir / "checkpoints/last.ckpt") == STEPS
    assert _step(run_dir / "checkpoints/best.ckpt") == EVERY
    assert math.isclose(result["best"]["val/loss"], losses[0][1], rel_tol=1e-6)


def test_a_checkpoint_of_an_earlier_ablate_keeps_its_best():
    """A last.ckpt written before the best was ablate's own holds Lightning's ModelCheckpoint state on val/loss: a run
    resumed from it keeps that best (the state of the Best callback, when there is one, is loaded after)."""
    best = Best(REPO / "not-written", cfg=None)
    key = ("ModelCheckpoint{'monitor': 'val/loss', 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1, "
           "'train_time_interval': None}")
    best.on_load_checkpoint(None, None, {"callbacks": {key: {"best_model_score": torch.tensor(2.5)}}})
    assert best.value == 2.5
    other = Best(REPO / "not-written", cfg=None)
    other.on_load_checkpoint(None, None, {"callbacks": {key.replace("val/loss", "step"): {"best_model_score": 7}}})
    assert other.value == math.inf  # a step checkpoint's "best" is its step, not a loss
    other.load_state_dict({"value": 1.25})
    assert other.value == 1.25
