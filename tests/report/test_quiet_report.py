"""`ablate report` keeps the libraries' chatter off the terminal: wandb's lines on an offline run (where its data is,
how to sync it) and matplotlib's warnings (a variant's name in a script its font lacks) go to report/report.log, and
stderr holds nothing but errors. The real command, in a child process, on a small sweep folder whose runs logged to
W&B (offline: no key, no network)."""

from __future__ import annotations

import os
import subprocess
import sys

from ablate.report import build_report, write_report
from tests.conftest import REPO
from tests.report.conftest import make_verdict_sweep

ROWS = {"base": (3, 0.0), "学习率": (3, 0.1), "none🙂": (3, 1.6)}  # names DejaVu Sans has no glyphs for
W_AND_B = "logger: wandb\nwandb:\n  project: ablate\n  entity: null\n  group: null\n  mode: offline\n"


def test_ablate_report_prints_no_wandb_banner_and_no_warnings(tmp_path):
    sweep = make_verdict_sweep(tmp_path, ROWS)
    for run in (sweep / "runs").iterdir():
        (run / "config.yaml").write_text(W_AND_B)  # the report's table goes to W&B, as the runs' config says
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    env.pop("PYTHONWARNINGS", None)  # what a user sees by default
    done = subprocess.run([sys.executable, "-m", "ablate.cli", "report", str(sweep)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no "wandb: ..." lines, no UserWarning
    assert "学习率" in done.stdout and done.stdout.rstrip().endswith("report.html")
    log = (sweep / "report" / "report.log").read_text()
    assert "Glyph" in log and "missing from font" in log  # matplotlib's warning, kept
    assert "wandb: Run data is saved locally" in log and "wandb sync" not in done.stdout  # wandb's note, kept
    assert list((sweep / "report" / "wandb").glob("offline-run-*"))  # and the table still went to W&B


def test_a_report_whose_plots_say_nothing_has_no_log(tmp_path):
    sweep = make_verdict_sweep(tmp_path, {"base": (3, 0.0), "learned": (3, 0.1)})
    (sweep / "report").mkdir()
    (sweep / "report" / "report.log").write_text("an earlier report's warnings\n")
    paths = write_report(build_report(sweep), sweep / "report")
    assert "report.log" not in paths and not (sweep / "report" / "report.log").exists()  # a stale log goes
