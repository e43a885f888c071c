"""What a run checks before it writes anything, and what it keeps across attempts: its own folder when two start in
one second, its wall time over every attempt, files readable by others."""

from __future__ import annotations

import json
import logging
import re
import stat
from pathlib import Path

import pytest

import ablate
from ablate.errors import ConfigError
from ablate.runs.files import write_json
from ablate.train import preflight
from ablate.train.run import train
from tests.conftest import TINY

FAST = ["train.max_steps=12", "train.val_every=6", "train.log_every=3", "trainer.enable_progress_bar=false"]


def test_two_runs_of_one_config_started_in_one_second_get_two_folders(in_tmp, monkeypatch):
    cfg = ablate.load_config(None, TINY)
    monkeypatch.setattr(preflight.time, "strftime", lambda fmt: "20261123-120000")
    first, second = preflight.make_run_dir(cfg), preflight.make_run_dir(cfg)
    assert first != second and first.is_dir() and second.is_dir() and second.name == f"{first.name}-2"


def test_a_resumed_runs_wall_time_counts_every_attempt(in_tmp):
    """Stopped at its first step (STOP), then trained on: the wall time includes the first attempt's seconds, which
    travel in the checkpoint (a SIGKILLed attempt leaves no result to add up)."""
    cfg = ablate.load_config(None, TINY + FAST + ["output_dir=run"])
    Path("run").mkdir()
    (Path("run") / "STOP").write_text("test\n")
    train(cfg)
    first = json.loads((Path("run") / "result.json").read_text())
    assert first["status"] == "stopped"
    (Path("run") / "STOP").unlink()
    ckpt = __import__("torch").load(Path("run") / "checkpoints" / "last.ckpt", weights_only=False)
    carried = next(v["seconds"] for k, v in ckpt["callbacks"].items() if "WallClock" in k)
    result = json.loads((Path(train(cfg)) / "result.json").read_text())
    assert result["status"] == "finished" and result["resumed_from"]
    assert result["wall_time_s"] > carried > 0


def test_files_a_run_writes_are_readable_by_others(in_tmp):
    write_json(Path("r.json"), {"a": 1})
    assert stat.S_IMODE(Path("r.json").stat().st_mode) == 0o644


def test_checking_the_trainer_leaves_lightnings_messages_on():
    """The throwaway Trainer is quiet; the real one still says which device it uses and why fit stopped."""
    rank_zero = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    rank_zero.setLevel(rank_zero.level)  # empties logging's caches: the Trainer's own messages fill them as it starts
    preflight.check_trainer(ablate.load_config(None, TINY))
    assert rank_zero.isEnabledFor(logging.INFO)  # logging caches each logger's answer; the level alone is not enough


# Issue 27, cause 3: whatever can be checked is checked before the run folder exists. Each of these used to fail once
# the folder was made (exit 1, a failed result.json); now train() refuses it and leaves no folder.
REFUSED_BEFORE_ANY_WRITE = {
    "train.schedule_args.warmup=-5": "train.schedule_args.warmup=-5",
    "train.schedule_args.warmup=0": "a positive integer for schedule=noam",
    "trainer.precision=banana": "trainer.precision",
    "logger=wandb": "needs a W&B API key",
}


@pytest.mark.parametrize("override", sorted(REFUSED_BEFORE_ANY_WRITE))
def test_a_setting_that_cannot_be_used_is_refused_before_the_run_folder_exists(override, in_tmp, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setattr("ablate.runs.wandb.has_api_key", lambda: False)
    cfg = ablate.load_config(None, TINY + FAST + [override, "output_dir=run"])
    with pytest.raises(ConfigError, match=re.escape(REFUSED_BEFORE_ANY_WRITE[override])):
        train(cfg)
    assert list(in_tmp.iterdir()) == []
