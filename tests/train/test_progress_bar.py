"""The training progress: off a terminal (a sweep run's log) a line at the first step, the steps the loss is logged at
and the last, showing the loss logged at that step, and one line per validation; on a terminal, Lightning's bar at
every step."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import ablate
from ablate.runs.files import read_metrics
from ablate.train.run import train
from tests.conftest import REPO

BAR = re.compile(r"Epoch 0: .*?\b(\d+)/\d+ .*?(?:train/loss=([^\s,\]]+))?\]")  # Lightning's bar, on a terminal
LINE = re.compile(r"^step (\d+)/10 · [\d.e+]+ steps/s(?: · train/loss (\S+))?$")  # a line, off one


def _run(tmp: Path, capsys) -> tuple[Path, str]:
    """A 10-step run logging every 4 steps, progress on; its run directory and what it printed on stdout."""
    cfg = ablate.load_config(REPO / "configs/default.yaml", [
        "train.max_steps=10", "train.val_every=1000", "train.log_every=4", "logger=none", "trainer.accelerator=cpu",
        "trainer.precision=32-true", "trainer.enable_progress_bar=true", "model.n_layers=1", "model.d_model=32",
        "data.task_args.n_train=1280", "data.task_args.n_val=64", f"output_dir={tmp}"])
    run_dir = train(cfg)
    return run_dir, capsys.readouterr().out


def test_off_a_terminal_a_line_at_the_first_the_logged_and_the_last_step_each_once(tmp_path, capsys):
    run_dir, out = _run(tmp_path / "log", capsys)
    assert "\r" not in out and "\033" not in out  # lines, no redraws
    lines = out.splitlines()
    steps = {int(m[1]): m[2] for line in lines if (m := LINE.match(line))}
    assert [int(m[1]) for line in lines if (m := LINE.match(line))] == [1, 4, 8, 10]  # each once, in order
    logged = {int(r["step"]): r["train/loss"] for r in read_metrics(run_dir) if r.get("train/loss") is not None}
    assert sorted(logged) == [4, 8, 10]
    for step, loss in logged.items():
        assert steps[step] == f"{loss:.4g}"  # the loss logged at that very step
    assert steps[1] is None  # nothing logged yet
    assert lines[0] == "Epoch 0: training from step 0 to 10"  # before the first step (benchmarks/startup.py)
    validations = [line for line in lines if line.startswith("validation")]
    val = next(r for r in read_metrics(run_dir) if r.get("val/loss") is not None)
    assert validations == [f"validation at step 10: val/loss {val['val/loss']:.4g} · val/ppl {val['val/ppl']:.4g} · "
                           f"val/acc {val['val/acc']:.4g}"]


def test_on_a_terminal_the_bar_is_drawn_at_every_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    _, out = _run(tmp_path / "terminal", capsys)
    drawn = {int(m[1]) for line in re.split(r"[\r\n]", out) if (m := BAR.search(line))}
    assert sorted(drawn) == list(range(11))
