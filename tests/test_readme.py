"""The README's promises: its test command is what CI runs, and its custom-component example works."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _block_after(label: str) -> str:
    """The fenced code block that follows a line starting with ``label``."""
    match = re.search(rf"^{re.escape(label)}.*?\n```\w*\n(.*?)```", README, flags=re.S | re.M)
    assert match, f"README has no code block after {label!r}"
    return match.group(1)


def test_ci_runs_the_readme_test_command():
    test_command = _block_after("Run the tests:").strip()
    assert test_command in (REPO / ".ci" / "run").read_text()


def test_readme_custom_positional_example_works(tmp_path):
    (tmp_path / "configs").symlink_to(REPO / "configs")
    (tmp_path / "my_positional.py").write_text(_block_after("`my_positional.py`:"))
    (tmp_path / "gated.yaml").write_text(_block_after("`gated.yaml`:"))

    def ablate(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ablate.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    listed = ablate("components", "positional", "--import", "my_positional")
    assert listed.returncode == 0, listed.stderr
    assert "gated_sinusoidal" in listed.stdout and "init: float = 1.0" in listed.stdout
    run = ablate("train", "gated.yaml", "train.max_steps=4", "train.val_every=2", "trainer.enable_progress_bar=false",
                 "output_dir=run")
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "finished"
    assert "gated_sinusoidal" in (tmp_path / "run" / "config.yaml").read_text()
