"""What a relaunch checks before it writes anything: the design is the first launch's (a change is refused in one line
naming it), and every folder it will write in takes a file (a read-only one is refused in one line, exit 2, nothing
written)."""

from __future__ import annotations

import errno
import json
from dataclasses import replace

import pytest

from ablate.errors import ConfigError
from ablate.sweep import load_sweep
from ablate.sweep.launch import check_design
from ablate.sweep.plan import Planner, read_earlier, write_plan
from tests.sweep.conftest import ablate_here, sweep_file


def _launched(tmp_path, max_seeds: int):
    """A two-row sweep whose plan.json says it was launched with ``--max-seeds max_seeds``."""
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: wide, model.d_ff: 96}
    """)
    path.write_text(path.read_text() + "parameters:\n  seed: {values: [0, 1]}\ndecide: {margin: 0.1, max_seeds: 10}\n")
    sweep = load_sweep(path)
    sweep.decide = replace(sweep.decide, max_seeds=max_seeds)
    sweep_dir = tmp_path / "sweeps" / "t"
    write_plan(sweep, sweep_dir, Planner(sweep).plan(sweep.points()))
    return path, sweep_dir


def test_a_relaunch_without_the_first_launchs_max_seeds_is_refused_naming_it(tmp_path):
    path, sweep_dir = _launched(tmp_path, 4)
    for extra in ([], ["--dry-run"]):
        out = ablate_here("sweep", str(path), *extra, cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "max_seeds" in lines[0] and "4 -> 10" in lines[0], lines
    check_design(replace_max(load_sweep(path), 4), sweep_dir, read_earlier(sweep_dir))  # the same design: no word
    asked = ablate_here("sweep", str(path), "--dry-run", "--change-design", cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr


def test_a_changed_margin_is_refused(tmp_path):
    path, sweep_dir = _launched(tmp_path, 10)
    sweep = load_sweep(path)
    sweep.decide = replace(sweep.decide, margin=None)
    with pytest.raises(ConfigError, match="decide.margin 0.1 -> None"):
        check_design(sweep, sweep_dir, read_earlier(sweep_dir))


def replace_max(sweep, max_seeds):
    sweep.decide = replace(sweep.decide, max_seeds=max_seeds)
    return sweep


def test_a_read_only_run_folder_is_refused_in_one_line_and_nothing_is_written(tmp_path, monkeypatch):
    from ablate.sweep import launch

    path = sweep_file(tmp_path, "- {name: base}")
    first = ablate_here("sweep", str(path), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    sweep_dir = tmp_path / "sweeps" / "t"
    run_dir = next((sweep_dir / "runs").iterdir())
    result = json.loads((run_dir / "result.json").read_text())
    (run_dir / "result.json").write_text(json.dumps({**result, "status": "interrupted"}))  # as a kill leaves it
    (run_dir / "config.yaml").unlink()
    before = {p: p.read_bytes() for p in sweep_dir.rglob("*") if p.is_file()}

    def read_only(folder):
        if folder.resolve() == run_dir.resolve():
            raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(launch, "probe", read_only)
    out = ablate_here("sweep", str(path), cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Read-only file system" in lines[0] and str(run_dir.name) in lines[0], lines
    assert {p: p.read_bytes() for p in sweep_dir.rglob("*") if p.is_file()} == before


def test_a_cut_array_checkpoint_is_refused_naming_it_unless_its_array_ended(tmp_path):
    from ablate.runs.files import write_json
    from ablate.sweep.launch import check_array_checkpoints

    members = [tmp_path / "runs" / name for name in ("a", "b")]
    for member, status in zip(members, ("finished", "interrupted")):
        write_json(member / "result.json", {"status": status})
    array = tmp_path / "arrays" / "abc"
    write_json(array / "array.json", {"members": [str(m) for m in members]})
    (array / "last.ckpt").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(ConfigError, match="abc/last.ckpt.*delete it"):
        check_array_checkpoints(tmp_path)
    write_json(members[1] / "result.json", {"status": "finished"})  # the array ended: its checkpoint is not read
    check_array_checkpoints(tmp_path)
