"""A study lives where the researcher keeps it: a folder outside the clone, holding its sweep file and its own
component module, launched from that folder, stopped by a real signal, and resumed by the printed command, run as
printed by a fresh shell standing in another folder; the runs keep their ids."""

from __future__ import annotations

import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import TINY
from tests.sweep.conftest import FAST, plan_of, run_statuses

pytestmark = pytest.mark.slow

PARTS = '''
"""The study's own FFN: tanh in place of ReLU."""

from torch import nn

from ablate import register
from ablate.components.feedforward import FeedForward


@register("ffn", "study_tanh")
def tanh_ffn(*, d_model: int, d_ff: int, bias: bool = True) -> FeedForward:
    """FFN(x) = tanh(x W1 + b1) W2 + b2."""
    return FeedForward(d_model=d_model, d_ff=d_ff, activation=nn.Tanh(), bias=bias)
'''


@pytest.fixture
def study(tmp_path) -> Path:
    """``study/``: a sweep file naming ablate's shipped configs/default.yaml by name, and the module it imports."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "study_parts.py").write_text(PARTS)
    rows = "\n".join(f"      - {r}" for r in ("{name: base}", "{name: tanh, model.ffn: study_tanh}"))
    (folder / "mystudy.yaml").write_text(textwrap.dedent(f"""\
        name: mystudy
        imports: [study_parts]
        base:
          config: configs/default.yaml
          overrides: [{", ".join([*FAST, "train.max_steps=16"])}]
        rows:
        """) + rows + "\n")
    return folder


def _env(tmp_path: Path) -> dict[str, str]:
    """A shell whose ``ablate`` is this interpreter's, with the study nowhere on the import path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "ablate"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ablate.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and "study" not in p]
    return {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join(pythonpath)}


def _ids(sweep_dir: Path) -> list[str]:
    return [r["id"] for r in plan_of(sweep_dir)["runs"]]


def test_a_study_outside_the_clone_is_launched_stopped_and_resumed_from_another_folder(study, tmp_path):
    env = _env(tmp_path)
    dry = subprocess.run(["ablate", "sweep", "mystudy.yaml", "--dry-run", "--json"], cwd=study, env=env,
                         capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-2000:]
    planned = [r["id"] for r in json.loads(dry.stdout)["runs"]]
    proc = subprocess.Popen(["ablate", "sweep", "mystudy.yaml", "--workers", "1"], cwd=study, env=env,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sweep_dir = study / "sweeps" / "mystudy"
    deadline = time.monotonic() + 300
    while not any(sweep_dir.glob("runs/*/progress.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # waits on the event: the first run has validated once
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "finished" not in run_statuses(sweep_dir)[1:]
    command = err.rstrip("\n").split("\n")[-1].split("with: ", 1)[1]
    assert command == (f"ablate sweep {shlex.quote(str(study / 'mystudy.yaml'))} --out "
                       f"{shlex.quote(str(sweep_dir))} --workers 1")
    config = yaml.safe_load((sweep_dir / plan_of(sweep_dir)["runs"][0]["run_dir"] / "config.yaml").read_text())
    assert config["imports"] == ["study_parts"] and config["paths"]["imports"] == [str(study)]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(["bash", "-c", command], cwd=elsewhere, env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert run_statuses(sweep_dir) == ["finished", "finished"]
    assert _ids(sweep_dir) == planned  # the same runs: launched from the study, resumed from elsewhere
    assert not (elsewhere / "sweeps").exists()


def test_a_stopped_ablate_train_of_a_study_config_resumes_as_printed_from_another_folder(tmp_path):
    """``ablate train`` of a study's config, whose module is beside it, stopped by Ctrl-C's signal: its printed
    command resumes it from another folder, the module found from what the run recorded."""
    configs = tmp_path / "study" / "configs"
    configs.mkdir(parents=True)
    (configs / "study_parts.py").write_text(PARTS)
    (configs / "tiny.yaml").write_text(textwrap.dedent("""\
        defaults: [configs/default.yaml]
        imports: [study_parts]
        model: {ffn: study_tanh}
        train: {max_steps: 40, val_every: 10}
        """))
    env = _env(tmp_path)
    proc = subprocess.Popen(["ablate", "train", "configs/tiny.yaml", *TINY, "train.log_every=5", "output_dir=run",
                             "trainer.enable_progress_bar=false", "logger=none"], cwd=configs.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = configs.parent / "run"
    deadline = time.monotonic() + 300
    while not (run / "progress.json").is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    command = err.strip().splitlines()[-1].split("resume with: ", 1)[1]
    assert command == f"ablate train {shlex.quote(str(run / 'config.yaml'))} {shlex.quote(f'output_dir={run}')}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(["bash", "-c", command], cwd=elsewhere, env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished" and result["resumed_from"] == str(run / "checkpoints" / "last.ckpt")
