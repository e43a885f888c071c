"""One life for every run: each event of a run's life (finished, stopped by STOP, failed on a non-finite loss,
interrupted by SIGTERM and relaunched, killed and relaunched) happens the same way to a solo run (``ablate train``) and
to a member of a 2-member seed array (``ablate train-array``, what a GPU user runs by default), on the CPU.

Each test runs for ``kind`` solo and array. For the array, the member under test (seed 0) is compared with its solo
twin (the same config and seed, dropout off, fp32): the same ``result.json`` keys (``fused`` aside) and the same values
to fp32 tolerance (times, throughputs and paths aside).

A signal or a kill is sent once the run under test has reached a known step (its ``progress.json`` or its
``last.ckpt`` appears), never after a delay.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import wandb
from omegaconf import OmegaConf

from ablate.config import load_config
from tests.conftest import LM, REPO, TINY, ablate_here, assert_same_values, result_of
from tests.runs.wandb_records import RunLog

STEPS, EVERY = 40, 10
ARGS = [*TINY, "trainer.enable_progress_bar=false", "trainer.precision=32-true", "trainer.threads=1",
        "model.dropout=0.0", "model.attention_dropout=0.0", f"train.max_steps={STEPS}", f"train.val_every={EVERY}",
        "train.log_every=5", "data.task_args={n_train: 2000, n_val: 64}", "data.batch_size=32"]
KINDS = ["solo", "array"]
RESUMED = frozenset({"fused", "resumed_exactly"})  # what a resumed run records beside the uninterrupted one
DIVERGES = ["train.schedule_args.scale=1e30"]  # the learning rate makes the loss leave the float range

# what differs between two lives of one run whatever trained them: when and where, how fast, and the trace's frames
NOT_COMPARED = {"run_dir", "started_at", "wall_time_s", "tokens_per_s", "resumed_from", "traceback", "threads",
                "allocator", "visible_devices", "config_hash", "fused"}


def _cfg(out: Path, seed: int, *extra: str):
    return load_config(REPO / "configs/default.yaml", [*ARGS, *extra, f"seed={seed}", f"output_dir={out}"])


def _command(kind: str, work: Path, *extra: str) -> tuple[list[str], Path]:
    """The ``ablate`` arguments that train ``kind`` in ``work``, and the run directory under test (seed 0's)."""
    if kind == "solo":
        return ["train", str(REPO / "configs/default.yaml"), *ARGS, *extra, "seed=0", f"output_dir={work / 'run'}"], \
            work / "run"
    paths = []
    for seed in (0, 1):
        path = work / f"member-s{seed}.yaml"
        if not path.is_file():  # a relaunch gives the very same configs
            path.write_text(OmegaConf.to_yaml(_cfg(work / f"array/runs/s{seed}", seed, *extra)))
        paths.append(str(path))
    return ["train-array", *paths], work / "array/runs/s0"


def _train(kind: str, work: Path, *extra: str, before=None) -> tuple[int, Path]:
    """Train ``kind`` in this process; ``before(run_dir)`` first. Returns the exit code and the run under test."""
    args, run_dir = _command(kind, work, *extra)
    if before is not None:
        before(run_dir)
    return ablate_here(*args, cwd=work).returncode, run_dir


def _in_background(kind: str, work: Path) -> tuple[subprocess.Popen, Path]:
    args, run_dir = _command(kind, work)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ablate.cli", *args], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_default)
    return proc, run_dir


def _ctrl_c_default() -> None:
    """In the child, before it runs ablate: SIGINT's default, as a terminal's foreground job has it (a suite started in
    the background ignores SIGINT, its children inherit that, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(ready, proc: subprocess.Popen) -> None:
    """Until ``ready()`` (the run wrote a file at a known step), or the process ended. Polls the file system: the
    event is a file another process writes."""
    deadline = time.time() + 600  # a guard against a hung test only: the event ends the wait
    while not ready() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert ready(), proc.communicate()[1][-3000:]


def _step_of(checkpoint: Path) -> int:
    try:
        return torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"]
    except (OSError, RuntimeError, EOFError):  # not there yet, or replaced while we read it
        return -1


def _comparable(result: dict) -> dict:
    """What two lives of one run must share: every recorded field but times, throughputs and paths."""
    kept = {k: v for k, v in result.items() if k not in NOT_COMPARED}
    if "final" in kept:
        kept["final"] = {k: v for k, v in kept["final"].items() if not k.endswith("tokens_per_s")}
    return kept


def _assert_same_result(a: Path, b: Path, *, aside: frozenset[str] = frozenset({"fused"})) -> None:
    """``a`` and ``b`` recorded the same run: the same result.json keys (``aside`` aside), the same values and the
    same progress.json."""
    ra, rb = ({k: v for k, v in result_of(d).items() if k not in aside} for d in (a, b))
    assert set(ra) == set(rb), sorted(set(ra) ^ set(rb))
    assert_same_values(_comparable(ra), _comparable(rb), "result")
    assert_same_values(_history(a), _history(b), "progress.json")


def _history(run_dir: Path) -> dict:
    path = run_dir / "progress.json"
    return json.loads(path.read_text())["history"] if path.is_file() else {}


def _stop(run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "STOP").write_text("hyperband: worse than the others\n")


# event: the overrides that bring it, and what is done to the run's folder before it starts
EVENTS = {"finished": ([], None), "stopped": ([], _stop), "diverged": (DIVERGES, None),
          "wandb": (["logger=wandb"], None)}  # no API key here: ablate logs offline into the run's folder


@pytest.fixture(scope="module")
def life(tmp_path_factory):
    """``life(kind, event)``: the run under test of ``kind`` that went through ``event``, trained once for the
    module, and the exit code of the command that trained it."""
    made: dict[tuple[str, str], tuple[int, Path]] = {}

    def run(kind: str, event: str) -> tuple[int, Path]:
        if (kind, event) not in made:
            extra, before = EVENTS[event]
            made[kind, event] = _train(kind, tmp_path_factory.mktemp(f"{kind}-{event}"), *extra, before=before)
            wandb.teardown()  # wandb-core writes a finished run's .wandb file in the background; wait for it
        return made[kind, event]

    return run


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_that_trains_to_its_end_is_finished_with_its_values(kind, life):
    code, run_dir = life(kind, "finished")
    result = result_of(run_dir)
    assert code == 0 and result["status"] == "finished" and result["step"] == STEPS
    history = _history(run_dir)["val/loss"]
    assert [s for s, _ in history] == list(range(EVERY, STEPS + 1, EVERY))
    assert result["final"]["val/loss"] == history[-1][1] and result["best"]["val/loss"] == min(v for _, v in history)
    assert result["train_tokens"] > 0 and result["tokens_per_s"] > 0 and result["wall_time_s"] > 0
    assert {"train/loss", "val/loss", "val/ppl", "val/acc"} <= set(result["final"])
    assert (run_dir / "checkpoints/last.ckpt").is_file() and (run_dir / "checkpoints/best.ckpt").is_file()
    if kind == "array":
        assert result["fused"]["index"] == 0 and result["fused"]["members"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_file_stops_the_run_at_the_step_it_is_read(kind, life):
    code, run_dir = life(kind, "stopped")
    result = result_of(run_dir)
    assert code == 0
    assert result["status"] == "stopped" and result["step"] == 1 and result["stopped_because"].startswith("hyperband")
    if kind == "array":  # the other member trains on
        assert result_of(run_dir.parent / "s1")["status"] == "finished"


@pytest.mark.parametrize("kind", KINDS)
def test_a_loss_that_diverges_fails_the_run_naming_its_step(kind, life):
    _, run_dir = life(kind, "diverged")
    result = result_of(run_dir)
    assert result["status"] == "failed", result
    assert re.fullmatch(r"FloatingPointError: train/loss is .+ at step \d+", result["error"]), result["error"]


@pytest.mark.parametrize("event", ["finished", "stopped", "diverged"])
def test_an_array_member_records_what_its_solo_twin_records(event, life):
    _, member = life("array", event)
    _, twin = life("solo", event)
    _assert_same_result(member, twin)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_signal_records_the_run_interrupted_at_the_step_it_saved(kind, signum, tmp_path):
    """SIGTERM (a scheduler's preemption) exits 143, SIGINT (Ctrl-C) 130, as a shell reports them."""
    proc, run_dir = _in_background(kind, tmp_path)
    _wait_for(lambda: (run_dir / "progress.json").is_file(), proc)  # written at the first validation
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 128 + signum, err[-3000:]
    result = result_of(run_dir)
    assert result["status"] == "interrupted" and result["interrupted_by"] == signal.Signals(signum).name, result
    assert EVERY <= result["step"] < STEPS and _step_of(run_dir / "checkpoints/last.ckpt") == result["step"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_relaunched_after_sigterm_ends_as_the_uninterrupted_one(kind, tmp_path, life):
    """Relaunched by the command its last line prints (``resume with: ...``): for an array, ``ablate train-array``
    of its members' configs and its folder."""
    proc, run_dir = _in_background(kind, tmp_path)
    _wait_for(lambda: (run_dir / "progress.json").is_file(), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    assert result_of(run_dir)["status"] == "interrupted"
    resume = re.search(r"resume with: (.+)$", err.strip().splitlines()[-1])
    assert resume, err[-3000:]
    command = shlex.split(resume.group(1))
    assert command[:2] == ["ablate", "train" if kind == "solo" else "train-array"], command
    code = ablate_here(*command[1:], cwd=tmp_path).returncode
    assert code == 0
    assert result_of(run_dir)["resumed_from"]
    _assert_same_result(run_dir, life(kind, "finished")[1], aside=RESUMED)


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_relaunched_after_a_kill_resumes_to_the_uninterrupted_one(kind, tmp_path, life):
    proc, run_dir = _in_background(kind, tmp_path)
    # the second validation's: the array's own checkpoint of the first is written by then
    _wait_for(lambda: _step_of(run_dir / "checkpoints/last.ckpt") >= 2 * EVERY, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=600)
    assert result_of(run_dir)["status"] == "running"  # killed: nothing recorded its end
    code, _ = _train(kind, tmp_path)
    assert code == 0
    assert result_of(run_dir)["resumed_from"]
    _assert_same_result(run_dir, life(kind, "finished")[1], aside=RESUMED)


def _wandb_log(run_dir: Path) -> RunLog:
    (folder,) = (run_dir / "wandb").glob("offline-run-*")
    return RunLog(next(folder.glob("run-*.wandb")))


def test_an_array_member_logs_to_wandb_what_its_solo_twin_logs(life):
    """The same history keys and val/loss by step, the same summary keys and values (best/..., final/...), the same
    config (its output_dir aside), and both runs end with the state their result.json says."""
    (code_a, member), (code_s, twin) = life("array", "wandb"), life("solo", "wandb")
    assert code_a == code_s == 0
    a, b = _wandb_log(member), _wandb_log(twin)
    assert {k for row in a.history for k in row} == {k for row in b.history for k in row}
    losses = [{row["step"]: row["val/loss"] for row in log.history if "val/loss" in row} for log in (a, b)]
    assert sorted(losses[0]) == list(range(EVERY, STEPS + 1, EVERY))
    assert_same_values(losses[0], losses[1], "history val/loss")
    for key in ("train/loss", "train/lr"):  # the learning rate logged at a step is the one that step trained with
        assert_same_values(*({row["step"]: row[key] for row in log.history if key in row} for log in (a, b)), key)
    assert a.summary.keys() == b.summary.keys() and {"best/val/loss", "final/val/loss"} <= a.summary.keys()
    untimed = [{k: v for k, v in log.summary.items() if not k.startswith("_") and "tokens_per_s" not in k
                and k not in NOT_COMPARED} for log in (a, b)]
    assert_same_values(*untimed, "summary")
    assert a.config.pop("output_dir") != b.config.pop("output_dir")
    assert_same_values(a.config, b.config, "config")
    for log, run_dir in ((a, member), (b, twin)):
        assert log.summary["status"] == result_of(run_dir)["status"] == "finished" and "exit" in log.kinds()


def _lm_train(kind: str, work: Path, data: Path) -> Path:
    """A tiny Tiny Shakespeare run of ``kind`` (``ablate evaluate`` scores text tasks only), as ARGS train: fp32, no
    dropout, one thread. Returns the run under test (seed 0's)."""
    work.mkdir()
    config, extra = REPO / "configs/tinyshakespeare.yaml", [
        *LM, "trainer.precision=32-true", "trainer.threads=1", "model.dropout=0.0", "model.attention_dropout=0.0",
        f"data.path={data / 'tinyshakespeare' / 'input.txt'}", f"data.cache_dir={work / 'cache'}"]
    if kind == "solo":
        args, run_dir = ["train", str(config), *extra, "seed=0", f"output_dir={work / 'run'}"], work / "run"
    else:
        args, run_dir = ["train-array"], work / "array/runs/s0"
        for seed in (0, 1):
            cfg = load_config(config, [*extra, f"seed={seed}", f"output_dir={work / f'array/runs/s{seed}'}"])
            (work / f"member-s{seed}.yaml").write_text(OmegaConf.to_yaml(cfg))
            args.append(str(work / f"member-s{seed}.yaml"))
    out = ablate_here(*args, cwd=work)
    assert out.returncode == 0, out.stderr[-3000:]
    return run_dir


def _untimed(record):
    """``record`` without the times it holds (``seconds``, at any depth)."""
    if isinstance(record, dict):
        return {k: _untimed(v) for k, v in record.items() if k != "seconds"}
    return record


def test_an_array_member_evaluates_as_its_solo_twin_does(shared_data, tmp_path):
    """``ablate evaluate`` of each, from its best and from its last checkpoint: the same scores recorded."""
    scores = []
    for kind in KINDS:
        run_dir = _lm_train(kind, tmp_path / kind, shared_data)
        for choice in ("best", "last"):
            before = result_of(run_dir)
            out = ablate_here("evaluate", str(run_dir), "--device", "cpu", "--checkpoint", choice, cwd=tmp_path)
            assert out.returncode == 0, out.stderr[-3000:]
            scores.append(_untimed({k: v for k, v in result_of(run_dir).items() if before.get(k) != v}))
    assert scores[0] and any(k.startswith("val/loss") for k in scores[0]), scores[0]
    assert_same_values(scores[0], scores[2], "best")
    assert_same_values(scores[1], scores[3], "last")
