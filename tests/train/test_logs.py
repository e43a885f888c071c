"""Logs written to a file are line-based, once per update, without third-party adverts: a tiny sweep run with its
output sent to a real file, as ``ablate sweep ... > sweep.log 2>&1`` does, and its runs' ``train.log``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pytorch_lightning.utilities.model_summary import get_human_readable_count

from ablate.model.flops import measure_flops, sequence_length
from ablate.model.meta import build_on_meta
from ablate.runs.files import read_metrics, read_run_config
from tests.conftest import REPO, TINY

STEPS = ["train.max_steps=8", "train.val_every=4", "train.log_every=2", "trainer.enable_progress_bar=true"]
ADVERTS = ("Tip:", "litlogger", "litmodels", "lightning.ai", "Total Flops")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, str]:
    """Two rows of two seeds, trained by ``ablate sweep`` with stdout and stderr in one file: the sweep's folder and
    that file's text."""
    tmp = tmp_path_factory.mktemp("logs")
    (tmp / "sweep.yaml").write_text(textwrap.dedent(f"""
        name: logs
        base: {{config: {REPO / 'configs' / 'default.yaml'}, overrides: [{', '.join(TINY + STEPS)}]}}
        rows:
          - {{name: base, model.positional: sinusoidal}}
          - {{name: rope, model.positional: rope}}
        parameters:
          seed: {{values: [0, 1]}}
        """))
    log = tmp / "sweep.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", "sweep.yaml", "--workers", "2"], cwd=tmp,
                       stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                       timeout=600, check=True)
    return tmp / "sweeps" / "logs", log.read_text()


def test_the_sweep_s_log_has_a_line_per_run_that_ends_each_once(sweep):
    _, text = sweep
    assert "\r" not in text and "\033" not in text
    progress = [line for line in text.splitlines() if line.startswith("sweep:")]
    assert [int(re.match(r"sweep: (\d+)/4 runs \[\d\d:\d\d\] done=\d, stopped=0, failed=0$", line)[1])
            for line in progress] == [1, 2, 3, 4]
    assert progress[-1].endswith("done=4, stopped=0, failed=0")


def test_each_run_s_log_has_a_line_per_update_and_no_advert(sweep):
    sweep_dir, _ = sweep
    logs = sorted(sweep_dir.glob("runs/*/train.log"))
    assert len(logs) == 4
    for path in logs:
        text = path.read_text()
        assert "\r" not in text and "\033" not in text and not any(a in text for a in ADVERTS), text
        lines = text.splitlines()
        assert [line for line in lines if line.startswith("step ")] == [
            line for line in lines if re.match(r"step [12468]/8 · [\d.e+]+ steps/s( · train/loss \S+)?$", line)]
        assert [int(re.match(r"step (\d+)", line)[1]) for line in lines if line.startswith("step ")] == [1, 2, 4, 6, 8]
        scores = [r for r in read_metrics(path.parent) if r.get("val/loss") is not None]
        assert [line for line in lines if line.startswith("validation")] == [
            f"validation at step {int(r['step'])}: val/loss {r['val/loss']:.4g} · val/ppl {r['val/ppl']:.4g} · "
            f"val/acc {r['val/acc']:.4g}" for r in scores]
        assert [int(r["step"]) for r in scores] == [4, 8]


def test_each_run_s_log_gives_its_model_s_parameters_and_measured_flops(sweep):
    """The summary line's FLOPs are the model's training FLOPs per target token, measured here by
    ``FlopCounterMode`` on a forward and backward pass of the model built on the meta device (the run printed the
    module walk's count)."""
    sweep_dir, _ = sweep
    path = sorted(sweep_dir.glob("runs/*/train.log"))[0]
    cfg = read_run_config(path.parent)
    model = build_on_meta(cfg)
    T = sequence_length(cfg, model)
    parameters = sum(p.numel() for p in model.parameters())
    line = (f"ablate: model {type(model).__name__}: {get_human_readable_count(parameters)} parameters, "
            f"{get_human_readable_count(int(measure_flops(model, cfg, T)))} training FLOPs per target token (T = {T})")
    assert line in path.read_text().splitlines()
