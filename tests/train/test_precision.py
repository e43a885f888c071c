"""``trainer.precision=auto``: bf16-mixed only where bf16 is native and, on a CPU, the model is wide enough for it to
pay; the run records what it used and bf16-mixed computes the same losses as fp32 up to bf16's rounding."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import ablate
from ablate.runs.files import read_metrics
from ablate.train import precision
from ablate.train.precision import BF16_MIN_D_MODEL, bf16_native, resolve_precision
from ablate.train.run import train
from tests.conftest import REPO


def _cpu_flags() -> set[str] | None:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return None
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return None


def test_the_cpu_is_native_bf16_exactly_when_its_flags_have_avx512_bf16_or_amx():
    flags = _cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo flags to check against")
    assert bf16_native("cpu") == bool({"avx512_bf16", "amx_tile"} & flags)  # not plain avx512f: emulated there


def test_auto_picks_bf16_mixed_only_where_bf16_is_native(monkeypatch):
    for native, expected in ((True, "bf16-mixed"), (False, "32-true")):
        asked: list[str] = []
        monkeypatch.setattr(precision, "bf16_native", lambda device, native=native: asked.append(device) or native)
        assert [resolve_precision("auto", a) for a in ("cpu", "auto", "gpu", "cuda")] == [expected] * 4
        assert asked == ["cpu", "cuda", "cuda", "cuda"]  # accelerator=cpu asks the CPU even where there is a GPU
        assert resolve_precision("auto", "mps") == "32-true"  # any other accelerator: fp32
    for explicit in ("32-true", "bf16-mixed", "16-mixed", "64-true"):
        assert resolve_precision(explicit, "cpu") == explicit  # anything else is Lightning's and passes through


def test_on_a_cpu_auto_picks_bf16_mixed_only_from_the_measured_width_up(monkeypatch):
    monkeypatch.setattr(precision, "bf16_native", lambda device: True)
    monkeypatch.setattr(precision.torch.cuda, "is_available", lambda: False)
    for accelerator in ("cpu", "auto"):
        assert resolve_precision("auto", accelerator, 64) == "32-true"  # the quickstart's model: bf16 took 2.2x fp32
        assert resolve_precision("auto", accelerator, BF16_MIN_D_MODEL - 1) == "32-true"
        assert resolve_precision("auto", accelerator, BF16_MIN_D_MODEL) == "bf16-mixed"
        assert resolve_precision("auto", accelerator, 512) == "bf16-mixed"
        assert resolve_precision("auto", accelerator) == "bf16-mixed"  # width unknown: the device alone decides
    assert resolve_precision("bf16-mixed", "cpu", 64) == "bf16-mixed"  # asked for: passes through whatever the width
    monkeypatch.setattr(precision, "bf16_native", lambda device: False)
    assert resolve_precision("auto", "cpu", 4096) == "32-true"  # emulated bf16: fp32 whatever the width


def test_on_a_gpu_the_width_is_not_consulted(monkeypatch):
    monkeypatch.setattr(precision, "bf16_native", lambda device: device == "cuda")
    monkeypatch.setattr(precision.torch.cuda, "is_available", lambda: True)
    assert resolve_precision("auto", "auto", 64) == resolve_precision("auto", "gpu", 64) == "bf16-mixed"
    assert resolve_precision("auto", "cpu", 512) == "32-true"  # accelerator=cpu asks the CPU (not native here)


def _run(tmp: Path, name: str, value: str) -> Path:
    cfg = ablate.load_config(REPO / "configs/default.yaml", [
        "train.max_steps=4", "train.val_every=2", "train.log_every=1", "logger=none", "trainer.accelerator=cpu",
        "trainer.enable_progress_bar=false", "train.keep_checkpoints=0", f"trainer.precision={value}",
        f"output_dir={tmp / name}"])
    return train(cfg)


def test_a_run_records_the_precision_auto_chose_and_bf16_mixed_matches_fp32(tmp_path):
    auto = json.loads((_run(tmp_path, "auto", "auto") / "result.json").read_text())
    wide = ablate.load_config(REPO / "configs/default.yaml").model.d_model >= BF16_MIN_D_MODEL
    assert auto["precision"] == ("bf16-mixed" if bf16_native("cpu") and wide else "32-true")
    losses = {}
    for value in ("32-true", "bf16-mixed"):
        run_dir = _run(tmp_path, value, value)
        assert json.loads((run_dir / "result.json").read_text())["precision"] == value
        losses[value] = [r["train/loss"] for r in read_metrics(run_dir) if "train/loss" in r]
    fp32, bf16 = losses["32-true"], losses["bf16-mixed"]
    assert len(fp32) == len(bf16) == 4 and all(map(math.isfinite, bf16))
    # Same seed, same batches: the first loss differs only by bf16 rounding (8 bits of mantissa, ~0.4 %).
    assert bf16[0] == pytest.approx(fp32[0], rel=0.02) and bf16[0] != fp32[0]
