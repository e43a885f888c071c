"""What a run keeps and what a relaunch makes of it.

- A run that started training and failed keeps its folder: ``config.yaml``, ``train.log``, its logged rows and a
  ``result.json`` that says ``failed``, at which step and why (a refusal before training writes nothing:
  tests/train/test_preflight.py).
- A run killed between the checkpoint of its last step and its ``result.json``, or whose ``result.json`` was removed,
  relaunches to the result the uninterrupted run recorded: the checkpoint carries the final values (solo and seed
  array alike). A damaged ``result.json`` is refused in one line whose command, run, lets the relaunch record it again.
- Following the truncated-checkpoint refusal (its command, run as printed) trains the run from its first step with no
  checkpoint of the attempt before: no stale ``best.ckpt`` beside a ``best-v1.ckpt``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import torch

import ablate
from ablate.cli import main
from ablate.runs.files import read_json, read_result
from ablate.train.array import train_array
from ablate.train.run import train
from tests.conftest import REPO, TINY

FAST = [*TINY, "logger=none", "trainer.enable_progress_bar=false", "train.max_steps=12", "train.val_every=4",
        "train.log_every=3", "trainer.threads=1"]
OF_THE_ATTEMPT = ("started_at", "wall_time_s", "tokens_per_s", "resumed_from", "resumed_exactly")


def _cfg(*extra: str):
    return ablate.load_config(REPO / "configs/default.yaml", [*FAST, *extra])


def _same(a: dict, b: dict) -> None:
    """Two results of one run, the fields of the attempt that wrote each aside."""
    strip = lambda r: {k: v for k, v in r.items() if k not in OF_THE_ATTEMPT}  # noqa: E731
    assert strip(a) == strip(b)


def _run_printed(command: str, cwd: Path) -> None:
    """A shell command ablate printed (``rm PATH``), run as printed."""
    subprocess.run(shlex.split(command), cwd=cwd, check=True)


def test_a_run_that_trained_and_failed_keeps_its_folder_and_record(in_tmp, capsys):
    """The issue's command: the loss is NaN from step 2; the folder stays, with everything a researcher needs to see
    which config diverged, where, and with what loss curve."""
    (in_tmp / "configs").symlink_to(REPO / "configs")
    code = main(["train", "train.max_steps=20", "train.val_every=20", "train.schedule_args.scale=1e12", "logger=none",
                 "trainer.enable_progress_bar=false", "output_dir=N"])
    out, err = capsys.readouterr()
    assert code == 1 and out.strip() == "N"
    assert err.strip().splitlines()[-1] == ("ablate: run failed: FloatingPointError: train/loss is nan at step 2 (see "
                                            f"{Path('N') / 'result.json'})")
    result = read_result(Path("N"))
    assert result["status"] == "failed" and result["error"] == "FloatingPointError: train/loss is nan at step 2"
    assert result["step"] == 20 and "FloatingPointError" in result["traceback"]
    assert ablate.load_config(Path("N/config.yaml")).train.schedule_args.scale == 1e12
    log = Path("N/train.log").read_text()
    assert "training from the first step" in log and "failed at step 20: FloatingPointError" in log
    assert list(Path("N/logs").glob("version_0/metrics.csv"))


class _Killed(BaseException):
    """What SIGKILL leaves: the process gone between two writes."""


def _killed_before_its_result(monkeypatch, cfg) -> dict:
    """Train ``cfg`` and "kill" it as it is about to write its finished result.json (after the checkpoint of its last
    step); returns the result it would have written."""
    from ablate.train import run as run_module

    would: dict = {}
    real = run_module.write_result

    def write_result(run_dir, result, merge=False):
        if result.get("status") == "finished":
            would.update(result)
            raise _Killed
        real(run_dir, result, merge=merge)

    monkeypatch.setattr(run_module, "write_result", write_result)
    with pytest.raises(_Killed):
        train(cfg)
    monkeypatch.setattr(run_module, "write_result", real)
    return json.loads(json.dumps(would, default=str))


def test_a_run_killed_between_its_last_checkpoint_and_its_result_relaunches_to_the_same_result(in_tmp, monkeypatch):
    cfg = _cfg("output_dir=run")
    whole = _killed_before_its_result(monkeypatch, cfg)
    assert read_result(Path("run"))["status"] == "running"  # as a kill leaves it
    assert torch.load(Path("run/checkpoints/last.ckpt"), weights_only=False)["global_step"] == 12
    train(cfg)  # the relaunch: it resumes at its last step and trains nothing
    relaunched = read_result(Path("run"))
    assert relaunched["final"] and relaunched["resumed_from"]
    _same(relaunched, whole)


def test_a_finished_run_whose_result_was_removed_relaunches_to_the_same_result(in_tmp):
    cfg = _cfg("output_dir=run")
    whole = read_result(train(cfg))
    Path("run/result.json").unlink()
    train(cfg)
    _same(read_result(Path("run")), whole)


@pytest.mark.parametrize("damage", [lambda text: text[: len(text) // 2], lambda text: "", lambda text: "[1, 2]"],
                         ids=["cut", "empty", "not-a-result"])
def test_a_damaged_result_is_refused_in_one_line_whose_command_recovers_it(in_tmp, capsys, damage):
    argv = ["train", str(REPO / "configs/default.yaml"), *FAST, "output_dir=run"]
    assert main(argv) == 0
    whole = read_result(Path("run"))
    path = Path("run/result.json")
    path.write_text(damage(path.read_text()))
    capsys.readouterr()
    assert main(argv) == 2  # never read as finished
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and str(path) in err, err
    command = re.search(r"remove it \((rm [^)]*)\) and run this command again", err)
    assert command, err
    _run_printed(command.group(1), in_tmp)
    assert main(argv) == 0
    _same(read_result(Path("run")), whole)


def test_an_array_relaunched_at_its_last_step_records_each_members_final_values(tmp_path):
    from tests.train.test_array import _cfg as member

    cfgs = [member(tmp_path / f"runs/s{s}", s) for s in (0, 1)]
    train_array(cfgs)
    whole = [read_result(tmp_path / f"runs/s{s}") for s in (0, 1)]
    for s in (0, 1):
        (tmp_path / f"runs/s{s}/result.json").unlink()
    train_array(cfgs)
    for s in (0, 1):
        relaunched = read_result(tmp_path / f"runs/s{s}")
        assert relaunched["final"] and relaunched["resumed_from"]
        # train/*: the uninterrupted array logs once more at its end, over an empty window (train/loss 0.0), which
        # the checkpoint of its last step precedes; that extra log is the array's own matter (train/members.py)
        validated = [{**r, "final": {k: v for k, v in r["final"].items() if not k.startswith("train/")}}
                     for r in (relaunched, whole[s])]
        assert set(relaunched["final"]) == set(whole[s]["final"])
        _same(*validated)


def test_following_the_truncated_checkpoint_refusal_leaves_no_stale_checkpoint(in_tmp, capsys):
    """A killed attempt's checkpoints, its last.ckpt cut short: the refusal's command removes last.ckpt, and the rerun
    starts over with none of that attempt's checkpoints: best.ckpt is this run's best, and there is no best-v1.ckpt."""
    argv = ["train", str(REPO / "configs/default.yaml"), *FAST, "output_dir=run"]
    assert main(argv) == 0
    folder = Path("run/checkpoints")
    torch.save({"global_step": 999, "state_dict": {}}, folder / "best.ckpt")  # the killed attempt's best
    (folder / "last.ckpt").write_bytes(b"cut short")
    result = read_result(Path("run"))
    Path("run/result.json").write_text(json.dumps({**result, "status": "running"}))  # as a kill leaves it
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    command = re.search(r"\((rm [^)]*)\), then run this command again", err)
    assert err.count("\n") == 1 and command, err
    _run_printed(command.group(1), in_tmp)
    assert main(argv) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["best.ckpt", "last.ckpt"]
    history = read_json(Path("run/progress.json"))["history"]["val/loss"]
    best_step = min(history, key=lambda point: point[1])[0]
    assert torch.load(folder / "best.ckpt", weights_only=False)["global_step"] == best_step
