"""The warm worker: a run forked from the server that imported torch and Lightning is the run a fresh interpreter
trains (bit for bit), sees its slot's environment, and reports failures with the same exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ablate.config import load_config
from ablate.sweep import warm
from ablate.sweep.children import Children, run_ablate
from tests.conftest import REPO, TINY, result_of

pytestmark = pytest.mark.slow

FAST = TINY + ["train.max_steps=12", "train.val_every=6", "train.log_every=3", "trainer.enable_progress_bar=false"]


def _config(tmp: Path, name: str, *extra: str) -> Path:
    cfg = load_config(REPO / "configs" / "default.yaml", [*FAST, *extra, f"output_dir={tmp / name}"])
    path = tmp / f"{name}.yaml"
    path.write_text(OmegaConf.to_yaml(cfg))
    return path


def test_a_warm_run_is_bit_identical_to_a_fresh_interpreters(tmp_path):
    assert warm.enabled()
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    codes = [run_ablate(["train", str(_config(tmp_path, name))], tmp_path / f"{name}.log", env, None, Children(),
                        fresh=fresh) for name, fresh in (("warm", False), ("fresh", True))]
    assert codes == [0, 0]
    warm_result, fresh_result = result_of(tmp_path / "warm"), result_of(tmp_path / "fresh")
    assert warm_result["final"]["val/loss"] == fresh_result["final"]["val/loss"]
    a = torch.load(tmp_path / "warm" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    b = torch.load(tmp_path / "fresh" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert "Trainer.fit" in (tmp_path / "warm.log").read_text()  # the run's output went to its log


def test_a_warm_run_sees_its_slots_environment(tmp_path):
    code = run_ablate(["train", str(_config(tmp_path, "env"))], tmp_path / "env.log",
                      {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}, None, Children())
    result = result_of(tmp_path / "env")
    assert code == 0 and result["threads"] == 1 and result["visible_devices"] == ""


def test_a_failing_warm_run_exits_as_a_fresh_one_does(tmp_path):
    diverges = ["train.schedule_args.scale=1e30", "train.log_every=1"]
    for name in ("w", "f"):  # made first, as the sweep's pool makes its runs' folders: a failed run is marked failed
        (tmp_path / name).mkdir()
    codes = [run_ablate(["train", str(_config(tmp_path, name, *diverges))], tmp_path / f"{name}.log",
                        {"OMP_NUM_THREADS": "1"}, None, Children(), fresh=fresh)
             for name, fresh in (("w", False), ("f", True))]
    assert codes == [1, 1]
    assert result_of(tmp_path / "w")["status"] == result_of(tmp_path / "f")["status"] == "failed"
    assert run_ablate(["train", "no-such.yaml"], tmp_path / "bad.log", {}, None, Children()) == 2  # bad input: exit 2


def test_a_script_without_a_main_guard_can_run_warm_runs(tmp_path):
    """multiprocessing re-runs the caller's main module in its children; a warm run must not."""
    script = tmp_path / "study.py"
    config = _config(tmp_path, "script")
    script.write_text(f"from pathlib import Path\nfrom ablate.sweep.children import Children, run_ablate\n"
                      f"print('code', run_ablate(['train', {str(config)!r}], Path({str(tmp_path / 's.log')!r}), "
                      f"{{'OMP_NUM_THREADS': '1'}}, None, Children()))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "code 0", done.stderr[-2000:]
    assert result_of(tmp_path / "script")["status"] == "finished"


def _exit_as_a_warm_run(leave: bool) -> None:
    import atexit

    if leave:
        warm._leave_shared_temporary_folders()
    atexit._run_exitfuncs()  # what a warm run does at its end (multiprocessing then ends it with os._exit)


def test_a_warm_run_leaves_the_temporary_folders_of_the_servers_wandb_to_later_runs():
    import multiprocessing

    import wandb  # noqa: F401  (the server imports it: warm.PRELOAD)
    from wandb.sdk.artifacts.artifact import Artifact
    from wandb.sdk.data_types._private import MEDIA_TMP

    assert "wandb" in warm.PRELOAD
    folders = [Path(MEDIA_TMP.name), Path(Artifact._TMP_DIR.name)]
    run = multiprocessing.get_context("fork").Process(target=_exit_as_a_warm_run, args=(True,))
    run.start()
    run.join()
    assert run.exitcode == 0 and all(folder.is_dir() for folder in folders)


def _settle_and_look_for(inherited: list) -> None:
    import gc

    warm.settle({})
    os._exit(0 if not any(o is inherited for o in gc.get_objects()) and gc.get_freeze_count() > 0 else 1)


def test_a_warm_run_leaves_the_servers_objects_out_of_its_garbage_collections():
    """Its collections never traverse (nor write to the pages of) what the server imported before the fork."""
    import gc
    import multiprocessing

    inherited = [[]]
    assert any(o is inherited for o in gc.get_objects())  # tracked by the collector here, before the fork
    run = multiprocessing.get_context("fork").Process(target=_settle_and_look_for, args=(inherited,))
    run.start()
    run.join()
    assert run.exitcode == 0


STARTS_A_WANDB_RUN = """
import importlib, json, multiprocessing, sys
from ablate.config import load_config
from ablate.runs.wandb import make_wandb_logger
from ablate.sweep import warm

for module in warm.PRELOAD:
    importlib.import_module(module)

def start(conn):
    cfg = load_config(sys.argv[1], [f"output_dir={sys.argv[2]}", "logger=wandb", "wandb.mode=offline"])
    logger = make_wandb_logger(cfg, sys.argv[2])
    before = set(sys.modules)
    run = logger.experiment
    conn.send(sorted(set(sys.modules) - before))
    run.finish()

ours, theirs = multiprocessing.Pipe()
child = multiprocessing.get_context("fork").Process(target=start, args=(theirs,))
child.start()
print(json.dumps(ours.recv()))
child.join()
"""


def test_a_warm_runs_wandb_run_starts_without_importing_anything(tmp_path):
    """What wandb.init imports on first use is imported once, by the server (warm.PRELOAD), not in every run."""
    done = subprocess.run([sys.executable, "-c", STARTS_A_WANDB_RUN, str(REPO / "configs/default.yaml"),
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "WANDB_SILENT": "true", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert list((tmp_path / "run" / "wandb").glob("offline-run-*/*.wandb"))  # the run did start
