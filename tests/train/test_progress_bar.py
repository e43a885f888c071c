"""The training progress bar: off a terminal (a sweep run's log) it is drawn at the first step, the steps the loss is
logged at and the last, showing the loss logged at that step; on a terminal, at every step."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pytorch_lightning.callbacks.progress.tqdm_progress import Tqdm

import ablate
from ablate.runs.files import read_metrics
from ablate.train.run import train
from tests.conftest import REPO

DRAWN = re.compile(r"Epoch 0: .*?\b(\d+)/\d+ .*?(?:train/loss=([^\s,\]]+))?\]")


def _run(tmp: Path, capsys) -> tuple[Path, dict[int, set[str | None]]]:
    """A 10-step run logging every 4 steps, bar on; the steps its training bar was drawn at -> the losses it showed."""
    cfg = ablate.load_config(REPO / "configs/default.yaml", [
        "train.max_steps=10", "train.val_every=1000", "train.log_every=4", "logger=none", "trainer.accelerator=cpu",
        "trainer.precision=32-true", "trainer.enable_progress_bar=true", "model.n_layers=1", "model.d_model=32",
        "data.task_args.n_train=1280", "data.task_args.n_val=64", f"output_dir={tmp}"])
    run_dir = train(cfg)
    drawn: dict[int, set[str | None]] = {}
    for line in re.split(r"[\r\n]", capsys.readouterr().out):
        if match := DRAWN.search(line):
            drawn.setdefault(int(match[1]), set()).add(match[2])
    return run_dir, drawn


def test_off_a_terminal_the_bar_is_drawn_at_the_first_the_logged_and_the_last_step(tmp_path, capsys):
    run_dir, drawn = _run(tmp_path / "log", capsys)
    assert sorted(drawn) == [0, 1, 4, 8, 10]  # 0: the epoch's start
    logged = {int(r["step"]): r["train/loss"] for r in read_metrics(run_dir) if r.get("train/loss") is not None}
    assert sorted(logged) == [4, 8, 10]
    for step, loss in logged.items():
        assert Tqdm.format_num(loss) in drawn[step]  # the loss logged at that very step
    assert drawn[1] == {None}  # nothing logged yet


def test_on_a_terminal_the_bar_is_drawn_at_every_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    _, drawn = _run(tmp_path / "terminal", capsys)
    assert sorted(drawn) == list(range(11))

