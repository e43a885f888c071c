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
from ablate.train.run import RunFailed, train
from tests.conftest import REPO, TINY

FAST = ["train.max_steps=12", "train.val_every=6", "train.log_every=3", "trainer.enable_progress_bar=false"]


def test_two_runs_of_one_config_started_in_one_second_get_two_folders(in_tmp, monkeypatch):
    cfg = ablate.load_config(None, TINY)
    monkeypatch.setattr(preflight.time, "strftime", lambda fmt: "20261123-120000")
    (first, _), (second, _) = preflight.make_run_dir(cfg), preflight.make_run_dir(cfg)
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


# What fails once the checks are passed. Before training starts (a failure while fit sets up: here the optimiser), a
# folder the command made is removed again, its parents made for it too: the place is as it was. A run that started
# training is an outcome: its folder stays, with its config, train.log and a result.json saying failed, where and why.
def _fails_at(monkeypatch, step: int) -> None:
    """Training raises at global step ``step`` (a bug, memory running out: what no check before can foresee)."""
    from ablate.train.system import TransformerSystem

    real = TransformerSystem.training_step

    def training_step(self, batch, batch_idx):
        if self.global_step == step:
            raise RuntimeError(f"boom at step {step}")
        return real(self, batch, batch_idx)

    monkeypatch.setattr(TransformerSystem, "training_step", training_step)


def _fails_before_training(monkeypatch) -> None:
    from ablate.train.system import TransformerSystem

    def configure_optimizers(self):
        raise RuntimeError("boom before training")

    monkeypatch.setattr(TransformerSystem, "configure_optimizers", configure_optimizers)


STEP = ["train.max_steps=6", "train.val_every=2", "train.log_every=1", "trainer.enable_progress_bar=false"]


@pytest.mark.parametrize("output_dir", ["deep/er/run", None])
def test_a_run_that_fails_before_training_in_a_folder_it_made_leaves_nothing(output_dir, in_tmp, monkeypatch, capsys):
    from ablate.cli import main

    _fails_before_training(monkeypatch)
    (in_tmp / "runs" / "tiny" / "earlier").mkdir(parents=True)  # another run's folder: it stays
    before = sorted(in_tmp.rglob("*"))
    argv = ["train", str(REPO / "configs/default.yaml"), *TINY, "name=tiny", *STEP]
    argv += [f"output_dir={output_dir}"] if output_dir else []
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert sorted(in_tmp.rglob("*")) == before and out == ""
    assert re.search(r"^ablate: run failed: RuntimeError: boom before training \(.*run.* was new and training had not "
                     r"started: removed, as it was before\)$", err, re.M), err


@pytest.mark.parametrize("output_dir", ["deep/er/run", None])
def test_a_run_that_fails_once_training_started_keeps_its_folder(output_dir, in_tmp, monkeypatch, capsys):
    from ablate.cli import main

    _fails_at(monkeypatch, 1)
    argv = ["train", str(REPO / "configs/default.yaml"), *TINY, "name=tiny", *STEP]
    argv += [f"output_dir={output_dir}"] if output_dir else []
    assert main(argv) == 1
    out, err = capsys.readouterr()
    run_dir = Path(out.strip())
    assert err.strip().splitlines()[-1] == \
        f"ablate: run failed: RuntimeError: boom at step 1 (see {run_dir / 'result.json'})"
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["step"] == 1 and result["error"] == "RuntimeError: boom at step 1"
    assert (run_dir / "config.yaml").is_file() and "failed at step 1: RuntimeError: boom at step 1" in \
        (run_dir / "train.log").read_text()


def test_a_run_that_fails_in_a_folder_that_was_there_is_marked_failed(in_tmp, monkeypatch):
    _fails_at(monkeypatch, 1)
    Path("run").mkdir()
    with pytest.raises(RunFailed, match=re.escape(f"boom at step 1 (see {Path('run') / 'result.json'})")):
        train(ablate.load_config(None, TINY + STEP + ["output_dir=run"]))
    result = json.loads((Path("run") / "result.json").read_text())
    assert result["status"] == "failed" and result["error"] == "RuntimeError: boom at step 1"
    assert "boom at step 1" in result["traceback"]


def test_a_run_that_fails_after_its_first_checkpoint_is_kept_to_resume(in_tmp, monkeypatch):
    """A new folder that holds a checkpoint is a run a rerun resumes, not a half-made folder: it stays, failed."""
    from ablate.train.system import TransformerSystem

    works = TransformerSystem.training_step
    _fails_at(monkeypatch, 3)
    cfg = ablate.load_config(None, TINY + STEP + ["output_dir=run"])
    with pytest.raises(RunFailed, match="see run/result.json"):
        train(cfg)
    assert json.loads((Path("run") / "result.json").read_text())["status"] == "failed"
    assert (Path("run") / "checkpoints" / "last.ckpt").is_file()
    monkeypatch.setattr(TransformerSystem, "training_step", works)
    train(cfg)  # the same command again: it resumes from the checkpoint and finishes
    result = json.loads((Path("run") / "result.json").read_text())
    assert result["status"] == "finished" and result["step"] == 6 and result["resumed_from"]


# Issue 27, cause 4: bounds from the model and the machine. A model whose parameters alone (a 16-bit weight and its
# gradient: 4 bytes each, whatever the precision and optimiser) exceed the memory of the device it trains on is refused
# before it is built (counted on the meta device), instead of taking that memory or being killed for it.
def test_a_model_past_the_devices_memory_is_refused_before_it_is_built(in_tmp, monkeypatch):
    from ablate.model import build_model

    cfg = ablate.load_config(None, TINY + STEP + ["output_dir=run"])
    n = sum(p.numel() for p in build_model(cfg).parameters())  # a real build, counted apart from the check's
    monkeypatch.setattr(preflight, "device_memory", lambda accelerator: (4 * n - 1, "a small machine's memory"))
    with pytest.raises(ConfigError, match=re.escape(f"model='{n:,} parameters' is not allowed; expected a model that "
                                                    f"fits in a small machine's memory: 0.0 GiB holds at most "
                                                    f"{n - 1:,} parameters while training")):
        train(cfg)
    assert list(in_tmp.iterdir()) == []
    monkeypatch.setattr(preflight, "device_memory", lambda accelerator: (4 * n, "a small machine's memory"))
    preflight.check_memory(cfg)  # exactly fits


def test_the_cpus_memory_is_the_machines_ram():
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert preflight.device_memory("cpu") == (int(meminfo["MemTotal"].split()[0]) * 1024, "this machine's memory")
    assert preflight.device_memory("mps") is None  # an accelerator it cannot ask: no bound
