"""Tiny trained runs shared by the tests of the commands that read a run back: a Multi30k
translation run (``run_dir``) and a Tiny Shakespeare language-model run (``lm_run_dir``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ablate
from ablate.train.run import train
from tests.conftest import REPO

SMALL = ["logger=none", "trainer.enable_progress_bar=false", "train.log_every=3", "model.n_layers=1",
         "model.d_model=32", "model.n_heads=4", "model.d_k=8", "model.d_v=8", "model.d_ff=64"]
TRANSLATION = SMALL + ["train.max_steps=12", "train.val_every=6", "train.schedule_args.warmup=6",
                       "data.limit_train=1000", "data.limit_val=40", "data.vocab_size=300", "data.max_tokens=1024",
                       "train.keep_checkpoints=2", "train.checkpoint_every=4"]
LM = SMALL + ["train.max_steps=6", "train.val_every=3", "train.schedule_args.warmup=3", "data.vocab_size=300",
              "data.max_len=32", "data.batch_size=8", "data.limit_train=64", "data.limit_val=8"]


@pytest.fixture(scope="session")
def run_dir(shared_data, tmp_path_factory) -> Path:
    """A finished tiny translation run: val/bleu logged at each validation, the last 2 step checkpoints (4 apart)
    kept."""
    tmp = tmp_path_factory.mktemp("translation-run")
    cfg = ablate.load_config(REPO / "configs/multi30k.yaml", TRANSLATION + [
        f"data.path={shared_data / 'multi30k'}", f"data.cache_dir={tmp / 'cache'}", f"output_dir={tmp / 'run'}"])
    return train(cfg)


@pytest.fixture(scope="session")
def lm_run_dir(shared_data, tmp_path_factory) -> Path:
    """A finished tiny decoder-only run on Tiny Shakespeare."""
    tmp = tmp_path_factory.mktemp("lm-run")
    cfg = ablate.load_config(REPO / "configs/tinyshakespeare.yaml", LM + [
        f"data.path={shared_data / 'tinyshakespeare' / 'input.txt'}", f"data.cache_dir={tmp / 'cache'}",
        f"output_dir={tmp / 'run'}"])
    return train(cfg)
