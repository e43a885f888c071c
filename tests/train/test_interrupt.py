"""SIGTERM (a cluster scheduler's preemption) and SIGINT (Ctrl-C) on ``ablate train``: the run saves the checkpoint of
the step it stands at, records ``interrupted``, prints one line with its folder and the command that resumes it, and
exits 128 + the signal; the printed command (and the one a refusal prints) resumes it, and the resumed run is the
uninterrupted one: the same weights, final and best values, tokens, validation history and logged rows.

The signal is sent once the run has validated for the first time (its ``progress.json`` appears), never after a
delay: where in the run it lands varies, and the assertions hold for any step.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ablate.runs.files import read_metrics
from tests.conftest import REPO, ablate_here

STEPS = 60
ARGS = [str(REPO / "configs/default.yaml"), "logger=none", "trainer.enable_progress_bar=false", "model.n_layers=1",
        "model.d_model=32", "model.n_heads=4", "model.d_ff=64", "data.task_args={n_train: 2000, n_val: 64}",
        f"train.max_steps={STEPS}", "train.val_every=10", "train.log_every=5", "trainer.threads=1"]
EPOCH_WARNING = "resuming from a checkpoint that ended before the epoch ended"


def _ablate(*args: str, cwd: Path, background: bool = False):
    command = [sys.executable, "-m", "ablate.cli", *args]
    if background:
        return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A command ablate printed, run as printed (``ablate ...`` through this interpreter, anything else as is)."""
    args = shlex.split(command)
    if args[0] == "ablate":
        return _ablate(*args[1:], cwd=cwd)
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until ``path`` exists (the process writes it at a known step), or the process has ended."""
    deadline = time.time() + 600  # a guard against a hung test only: the event ends the wait
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert path.exists(), proc.communicate()[1][-3000:]


def _step(checkpoint: Path) -> int:
    return torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"]


def _comparable(run_dir: Path) -> dict:
    """What an uninterrupted run and a stopped-and-resumed one must share (times and throughputs aside)."""
    result = json.loads((run_dir / "result.json").read_text())
    rows = [{k: v for k, v in row.items() if not k.endswith("tokens_per_s")} for row in read_metrics(run_dir)]
    return {"status": result["status"], "step": result["step"], "best": result["best"],
            "train_tokens": result["train_tokens"], "rows": rows,
            "final": {k: v for k, v in result["final"].items() if not k.endswith("tokens_per_s")},
            "history": json.loads((run_dir / "progress.json").read_text())["history"],
            "checkpoints": sorted(p.name for p in (run_dir / "checkpoints").iterdir())}


def _assert_same_run(a: Path, b: Path) -> None:
    assert _comparable(a) == _comparable(b)
    weights = [torch.load(d / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False) for d in (a, b)]
    for key, value in weights[0]["state_dict"].items():
        assert torch.equal(value, weights[1]["state_dict"][key]), key  # bit-identical
    for name in ("best.ckpt",):
        assert _step(a / "checkpoints" / name) == _step(b / "checkpoints" / name)


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    """The run uninterrupted."""
    work = tmp_path_factory.mktemp("whole")
    out = _ablate("train", *ARGS, "output_dir=run", cwd=work)
    assert out.returncode == 0, out.stderr[-3000:]
    return work / "run"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_signal_saves_where_the_run_stands_and_the_printed_command_resumes_it_exactly(whole, tmp_path, sig):
    proc = _ablate("train", *ARGS, "output_dir=run", cwd=tmp_path, background=True)
    _wait_for(tmp_path / "run" / "progress.json", proc)  # written at the first validation, step 10
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 128 + sig, err[-3000:]
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0] == err.strip().splitlines()[-1], err[-3000:]  # one line, the last
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    step = result["step"]
    assert result["status"] == "interrupted" and result["interrupted_by"] == sig.name and 10 <= step < STEPS
    assert _step(tmp_path / "run" / "checkpoints" / "last.ckpt") == step  # saved where it stood, not at step 10
    run = tmp_path / "run"  # the command names it absolute: it resumes the run from any folder
    resume = f"ablate train {shlex.quote(str(run / 'config.yaml'))} {shlex.quote(f'output_dir={run}')}"
    assert lines[0] == (f"ablate: interrupted by {sig.name} at step {step}, saved in "
                        f"{Path('run') / 'checkpoints' / 'last.ckpt'}; resume with: {resume}")
    # The same folder under another config is refused, and that refusal names the same command.
    other = ablate_here("train", *ARGS, "train.max_steps=400", "output_dir=run", cwd=tmp_path)
    assert other.returncode == 2 and other.stderr.strip().endswith(f"resume that run with: {resume}"), other.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = _run(resume, cwd=elsewhere)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip().splitlines()[-1] == str(run) and not (elsewhere / "runs").exists()  # there, not anew
    resumed = json.loads((tmp_path / "run" / "result.json").read_text())
    assert resumed["resumed_from"] == str(run / "checkpoints" / "last.ckpt")
    assert resumed["resumed_exactly"] is True and EPOCH_WARNING not in again.stderr  # exact: no such warning
    _assert_same_run(whole, tmp_path / "run")
    log = (tmp_path / "run" / "train.log").read_text()
    assert f"interrupted at step {step} ({sig.name}); resume with: {resume}" in log
    assert f"finished at step {STEPS}" in log


def test_a_finished_run_under_another_config_is_refused_with_what_to_do(whole):
    """Nothing to resume: the line says what to do instead (it used to name config.yaml, which starts a new run)."""
    out = ablate_here("train", *ARGS, "train.max_steps=400", f"output_dir={whole}", cwd=whole.parent)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert (f"it holds a finished run of another config (train.max_steps: {STEPS} -> 400); give another output_dir "
            "for this one") in out.stderr


TERM_AT = {  # a module --import loads: it sends the run SIGTERM as its config is read, or as Lightning asks for the
    # training loader (Lightning's own SIGTERM handler in place then)
    "config": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "setup": ("import os, signal\n"
              "from ablate.data.synthetic import _Synthetic\n"
              "_loader = _Synthetic.train_dataloader\n"
              "def train_dataloader(self):\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    return _loader(self)\n"
              "_Synthetic.train_dataloader = train_dataloader\n"),
}


@pytest.mark.parametrize("when", TERM_AT)
def test_a_signal_before_training_starts_leaves_nothing(tmp_path, when):
    """SIGTERM while the run is being set up stops it at once, in one line, exit 143: nothing was trained, so nothing
    is written (the folder the command made is removed)."""
    (tmp_path / "term_now.py").write_text(TERM_AT[when])
    out = _ablate("train", *ARGS, "output_dir=deep/run", "--import", "term_now", cwd=tmp_path)
    assert out.returncode == 128 + signal.SIGTERM, out.stderr[-3000:]
    removed = f" ({Path('deep/run')} was new: removed, as it was before)" if when == "setup" else ""
    assert out.stderr.strip().splitlines()[-1] == ("ablate: interrupted by SIGTERM before training started: nothing "
                                                   f"was written{removed}")
    assert {p.name for p in tmp_path.iterdir()} - {"__pycache__"} == {"term_now.py"}
