"""One recorder: a seed-array member's ``result.json`` is built by the function that builds a solo run's
(:func:`ablate.train.record.run_result`), so that it records the same fields with the same values as the solo run
of its config (its ``fused`` aside): precision, device, threads, attention kernel, parameters, the resume, the outcome.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import pytorch_lightning as pl

from ablate.config import load_config
from ablate.runs.files import read_result
from ablate.train.array import train_array
from ablate.train.run import train
from tests.conftest import REPO, TINY

COMMON = [*TINY, "trainer.enable_progress_bar=false", "trainer.accelerator=cpu", "train.max_steps=12",
          "train.val_every=6", "train.log_every=4", "data.task_args={n_train: 320, n_val: 64}", "data.batch_size=48",
          "trainer.threads=1", "model.dropout=0.0", "model.attention_dropout=0.0"]
# What differs between two runs of one config whatever records them: where and when they ran, and how fast.
OF_THE_ATTEMPT = {"run_dir", "started_at", "wall_time_s", "tokens_per_s"}


def _cfg(out: Path, seed: int, *extra: str):
    return load_config(REPO / "configs/default.yaml", [*COMMON, *extra, f"seed={seed}", f"output_dir={out}"])


def _trained_precisions(monkeypatch) -> list[str]:
    """The precision of every Trainer that fits from now on, as Lightning runs it."""
    seen: list[str] = []
    fit = pl.Trainer.fit

    def spy(self, *args, **kwargs):
        seen.append(str(self.precision))
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(pl.Trainer, "fit", spy)
    return seen


def _member_and_solo(tmp_path: Path, *extra: str) -> tuple[dict, dict]:
    train_array([_cfg(tmp_path / f"array/runs/s{s}", s, *extra) for s in (0, 1)])
    train(_cfg(tmp_path / "solo/s0", 0, *extra))
    return read_result(tmp_path / "array/runs/s0"), read_result(tmp_path / "solo/s0")


def test_an_array_member_records_every_field_its_solo_run_records(tmp_path):
    member, solo = _member_and_solo(tmp_path)
    fused = member.pop("fused")  # the one field a member has and its solo run has not
    assert fused["members"] == 2 and fused["index"] == 0 and Path(fused["array"]).is_dir()
    assert set(member) == set(solo), set(member) ^ set(solo)
    for key in sorted(set(solo) - OF_THE_ATTEMPT):
        if key in ("final", "best"):  # the same run, trained fused: the same values (fp32 rounding aside)
            assert set(member[key]) == set(solo[key]), key
            for metric in (m for m in solo[key] if m.startswith("val/")):
                assert math.isclose(member[key][metric], solo[key][metric], rel_tol=1e-5), (key, metric)
        else:
            assert member[key] == solo[key], key


@pytest.mark.parametrize("d_model, expected", [(64, "32-true"), (512, "bf16-mixed")])
def test_precision_auto_is_recorded_as_trained_solo_and_fused(tmp_path, monkeypatch, d_model, expected):
    """On a CPU that computes bf16 natively (here: said to), ``precision: auto`` trains a model narrower than d_model
    256 in fp32 and a wider one in bf16-mixed; solo or as an array's member, result.json says what Lightning ran."""
    monkeypatch.setattr("ablate.train.precision.bf16_native", lambda device="cuda": True)
    trained = _trained_precisions(monkeypatch)
    member, solo = _member_and_solo(tmp_path, f"model.d_model={d_model}", "model.d_ff=64", "train.max_steps=2",
                                    "train.val_every=2", "trainer.precision=auto")
    assert trained == [expected, expected]  # the array's Trainer, then the solo run's
    assert member["precision"] == solo["precision"] == expected
