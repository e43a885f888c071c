"""The learning rate a run really trains with, step by step, against the formulas (not ablate's schedule code):
the paper's Noam schedule, and ``train.lr`` as its peak (fairseq's inverse_sqrt), so a swept lr changes every step.

Each run is a real ``ablate.train.run.train`` on a tiny model; a callback reads the optimiser's lr before every
optimiser step.
"""

from __future__ import annotations

import pytest
import pytorch_lightning as pl

import ablate
from ablate.train import run as run_module
from tests.conftest import TINY

STEPS, WARMUP, D_MODEL = 24, 8, 32  # TINY's d_model
MAKE_TRAINER = run_module.make_trainer


def _lrs(tmp_path, monkeypatch, *overrides: str) -> list[float]:
    """The lr of each of a real run's optimiser steps."""
    seen: list[float] = []

    class Record(pl.Callback):
        def on_before_optimizer_step(self, trainer, module, optimizer):
            seen.append(optimizer.param_groups[0]["lr"])

    monkeypatch.setattr(run_module, "make_trainer", lambda cfg, run_dir, callbacks, **kw: MAKE_TRAINER(
        cfg, run_dir, [*callbacks, Record()], **kw))
    cfg = ablate.load_config(None, TINY + [f"train.max_steps={STEPS}", f"train.schedule_args.warmup={WARMUP}",
                                           "train.val_every=1000", "trainer.enable_progress_bar=false",
                                           f"output_dir={tmp_path / 'run'}", *overrides])
    run_module.train(cfg)
    assert len(seen) == STEPS
    return seen


def _paper(step: int) -> float:
    """lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5), step_num counted from 1."""
    return D_MODEL**-0.5 * min(step**-0.5, step * WARMUP**-1.5)


def test_noam_unset_is_the_paper_s_formula(tmp_path, monkeypatch):
    lrs = _lrs(tmp_path, monkeypatch)
    assert lrs == pytest.approx([_paper(s) for s in range(1, STEPS + 1)], rel=1e-12)
    assert max(lrs) == pytest.approx(D_MODEL**-0.5 * WARMUP**-0.5, rel=1e-12)  # its implicit peak, at step warmup


def test_a_swept_lr_under_noam_is_its_peak_and_scales_every_step(tmp_path, monkeypatch):
    low = _lrs(tmp_path / "a", monkeypatch, "train.lr=1e-3")
    high = _lrs(tmp_path / "b", monkeypatch, "train.lr=4e-3")
    assert [h / lo for h, lo in zip(high, low)] == pytest.approx([4.0] * STEPS, rel=1e-12)
    assert low[WARMUP - 1] == pytest.approx(1e-3, rel=1e-12) and max(low) == low[WARMUP - 1]
    paper_peak = _paper(WARMUP)
    assert low == pytest.approx([1e-3 * _paper(s) / paper_peak for s in range(1, STEPS + 1)], rel=1e-12)  # same shape
