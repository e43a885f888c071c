"""Seed arrays (``ablate train-array``): each member is the run its solo twin is, and an ordinary run to every reader.

- With dropout off in fp32, member k of an array ends where its solo run (same config, same seed) ends: the same
  initial weights, the same data order, its own gradient clipping, Adam state and schedule (weights within 1e-5,
  validation losses within 1e-5, relative), at every validation.
- A member whose loss goes NaN fails alone, naming its step; the others end as they would have without it.
- An array that fails as a whole fails every member still training, and its error names a result.json that says why.
- An array killed with SIGKILL and relaunched ends bit-identical to the same array uninterrupted (dropout on).
- Each member's directory reads as a run: result.json with ``fused``, progress.json, best/last weights that
  ``ablate evaluate``'s loader takes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ablate.config import load_config
from ablate.evaluate.load import load_run_model
from ablate.runs.files import read_json, read_result
from ablate.train.array import train_array
from ablate.train.run import train
from tests.conftest import REPO, TINY

STEPS, EVERY = 24, 8
COMMON = [*TINY, "trainer.enable_progress_bar=false", "trainer.precision=32-true", f"train.max_steps={STEPS}",
          f"train.val_every={EVERY}", "train.log_every=4", "data.task_args={n_train: 320, n_val: 64}",
          "data.batch_size=48", "trainer.threads=1"]


def _cfg(out: Path, seed: int, *extra: str):
    return load_config(REPO / "configs/default.yaml", [*COMMON, *extra, f"seed={seed}", f"output_dir={out}"])


def _weights(run_dir: Path, name: str = "last") -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / f"{name}.ckpt", map_location="cpu", weights_only=False)["state_dict"]


def _logits(run_dir: Path) -> torch.Tensor:
    """The run's last weights on a fixed batch of its own task: (B, T, V)."""
    from ablate.data import build_task

    cfg, model, _ = load_run_model(run_dir, checkpoint="last", device="cpu")
    task = build_task(cfg)
    task.setup("fit")
    batch = next(iter(task.val_dataloader()))
    with torch.no_grad():
        return model(**{k: v for k, v in batch.items() if k != "labels"})


LOGITS = {"rtol": 1e-4, "atol": 1e-4}  # logits of size ~2: a fused step sums in another order than a solo one, and on
# some CPUs (AVX512 without BF16) 24 Adam steps carry that to ~2e-5; two seeds' logits differ by ~2 (checked below)


def _assert_same_run(member: Path, solo: Path) -> None:
    """The same function (weights compared through what they compute: Adam with eps 1e-9 turns the float noise of
    a gradient that is zero in exact arithmetic, a key bias's, into full-size steps of either sign, which change
    nothing the model computes) and the same validation losses at every validation."""
    torch.testing.assert_close(_logits(member), _logits(solo), **LOGITS)
    history_f = read_json(member / "progress.json")["history"]["val/loss"]
    history_s = read_json(solo / "progress.json")["history"]["val/loss"]
    assert [s for s, _ in history_f] == [s for s, _ in history_s] == [EVERY, 2 * EVERY, 3 * EVERY]
    torch.testing.assert_close(torch.tensor([v for _, v in history_f]), torch.tensor([v for _, v in history_s]),
                               rtol=1e-5, atol=0)


def test_member_is_its_solo_run_without_dropout(tmp_path):
    extra = ["model.dropout=0.0", "model.attention_dropout=0.0"]
    members = [_cfg(tmp_path / f"array/runs/s{s}", s, *extra) for s in (0, 1, 2)]
    train_array(members)
    for s in (0, 1, 2):
        train(_cfg(tmp_path / f"solo/s{s}", s, *extra))
        _assert_same_run(tmp_path / f"array/runs/s{s}", tmp_path / f"solo/s{s}")
    # and the members differ from each other: three seeds, three runs, which the tolerance tells apart
    a, b = _weights(tmp_path / "array/runs/s0"), _weights(tmp_path / "array/runs/s1")
    assert not torch.equal(a["model.src_input.embedding.weight"], b["model.src_input.embedding.weight"])
    assert not torch.allclose(_logits(tmp_path / "array/runs/s0"), _logits(tmp_path / "solo/s1"), **LOGITS)


def test_each_member_is_clipped_by_its_own_norm():
    """One step's gradients, clipped: each member's are its solo model's after ``clip_grad_norm_`` (a member whose
    norm is under the bound is left as it is, one over it scaled to the bound)."""
    from ablate.data import build_task
    from ablate.data.members import stack_batches
    from ablate.train.fused_system import FusedSystem
    from ablate.train.system import TransformerSystem

    cfgs = [_cfg(Path("unused"), s, "model.dropout=0.0", "model.attention_dropout=0.0", "train.grad_clip=0.3")
            for s in (0, 1, 2)]
    plain = [OmegaConf.to_container(c, resolve=True, enum_to_str=True) for c in cfgs]
    tasks = [build_task(c) for c in cfgs]
    batches = []
    for task in tasks:
        task.setup("fit")
        batches.append(next(iter(task.train_dataloader())))
    fused = FusedSystem(plain)
    fused.training_step(stack_batches(batches, 0), 0).backward()
    fused.on_before_optimizer_step(None)
    norms = []
    for k, (cfg, batch) in enumerate(zip(plain, batches)):
        import pytorch_lightning as pl

        pl.seed_everything(cfg["seed"], verbose=False)
        solo = TransformerSystem(cfg)
        loss, _ = solo.training_loss(batch)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(solo.parameters(), 0.3)))
        grads = {n: p.grad for n, p in solo.model.named_parameters()}
        for name in fused.model.names:
            torch.testing.assert_close(fused.model.params()[name].grad[k], grads[name], rtol=1e-5, atol=1e-7,
                                       msg=name)
    assert max(norms) > 0.3  # the bound bites, at least for one member


def test_member_directory_reads_as_a_run(tmp_path):
    members = [_cfg(tmp_path / f"runs/s{s}", s) for s in (3, 4)]
    run_dirs = train_array(members)
    for k, run_dir in enumerate(run_dirs):
        result = read_result(run_dir)
        assert result["status"] == "finished" and result["step"] == STEPS
        assert result["fused"]["members"] == 2 and result["fused"]["index"] == k
        assert Path(result["fused"]["array"]).is_dir()
        history = read_json(run_dir / "progress.json")["history"]["val/loss"]
        assert result["final"]["val/loss"] == history[-1][1]
        assert result["best"]["val/loss"] == min(v for _, v in history)
        cfg, model, _ = load_run_model(run_dir, checkpoint="best", device="cpu")
        assert cfg.seed == members[k].seed
        assert (run_dir / "logs").is_dir() and OmegaConf.load(run_dir / "config.yaml").seed == members[k].seed


def test_a_member_that_goes_nan_fails_alone(tmp_path, monkeypatch):
    from ablate.train import fused_system

    real = fused_system.FusedSystem._member_losses
    poisoned_from = 10

    def poison(self, batch, smoothing, reduction):
        ce, *rest = real(self, batch, smoothing, reduction)
        if self.training and self.global_step >= poisoned_from:
            ce = ce + torch.tensor([0.0, float("nan"), 0.0])
        return (ce, *rest)

    members = [_cfg(tmp_path / f"array/runs/s{s}", s, "model.dropout=0.0", "model.attention_dropout=0.0")
               for s in (0, 1, 2)]
    monkeypatch.setattr(fused_system.FusedSystem, "_member_losses", poison)
    train_array(members)
    monkeypatch.undo()
    bad = read_result(tmp_path / "array/runs/s1")
    # the step poisoned is the one taken from global_step 10: step 11, as a solo run names it (its steps done)
    assert bad["status"] == "failed" and bad["error"].endswith(f"at step {poisoned_from + 1}"), bad
    for s in (0, 2):
        assert read_result(tmp_path / f"array/runs/s{s}")["status"] == "finished"
        train(_cfg(tmp_path / f"solo/s{s}", s, "model.dropout=0.0", "model.attention_dropout=0.0"))
        _assert_same_run(tmp_path / f"array/runs/s{s}", tmp_path / f"solo/s{s}")



def test_an_array_that_fails_as_a_whole_names_a_result_json_that_says_why(tmp_path, monkeypatch):
    """A failure no member caused alone (the fused step raising) fails every member; the error names a file that
    exists (a member's result.json, not the array folder's, which holds none) and counts the members recording it."""
    from ablate.train import fused_system
    from ablate.train.run import RunFailed

    real = fused_system.FusedSystem.training_step

    def broken(self, batch, batch_idx):
        if self.global_step >= 2:
            raise RuntimeError("the fused step broke")
        return real(self, batch, batch_idx)

    monkeypatch.setattr(fused_system.FusedSystem, "training_step", broken)
    with pytest.raises(RunFailed) as failed:
        train_array([_cfg(tmp_path / f"runs/s{s}", s) for s in (0, 1, 2)])
    named = re.search(r"see (\S+?result\.json)", str(failed.value))
    assert named and Path(named.group(1)).is_file(), failed.value
    assert "its seed array's 2 other members" in str(failed.value)
    assert read_json(Path(named.group(1))) == read_result(failed.value.run_dir)
    for s in (0, 1, 2):
        result = read_result(tmp_path / f"runs/s{s}")
        assert result["status"] == "failed" and "RuntimeError: the fused step broke" in result["error"], result


def _write_configs(tmp_path: Path, name: str, steps: int) -> list[str]:
    paths = []
    for s in (0, 1):
        cfg = _cfg(tmp_path / f"{name}/runs/s{s}", s, f"train.max_steps={steps}", "train.val_every=6")
        path = tmp_path / f"{name}-s{s}.yaml"
        path.write_text(OmegaConf.to_yaml(cfg))
        paths.append(str(path))
    return paths


def test_killed_array_resumes_exactly(tmp_path):
    steps = 36
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "ablate.cli", "train-array"]
    subprocess.run([*command, *_write_configs(tmp_path, "whole", steps)], check=True, env=env, capture_output=True)
    configs = _write_configs(tmp_path, "killed", steps)
    last = tmp_path / "killed/runs/s0/checkpoints/last.ckpt"
    child = subprocess.Popen([*command, *configs], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while child.poll() is None and not (last.is_file() and _step_of(last) >= 12):  # waits for a checkpoint, not a time
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert read_result(tmp_path / "killed/runs/s0")["status"] == "running"  # killed mid-way, nothing recorded
    subprocess.run([*command, *configs], check=True, env=env, capture_output=True)
    for s in (0, 1):
        whole, resumed = tmp_path / f"whole/runs/s{s}", tmp_path / f"killed/runs/s{s}"
        for key, value in _weights(whole).items():
            assert torch.equal(value, _weights(resumed)[key]), key
        assert read_json(whole / "progress.json")["history"] == read_json(resumed / "progress.json")["history"]
        assert read_result(resumed)["resumed_from"]


def _step_of(checkpoint: Path) -> int:
    try:
        return torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"]
    except (OSError, RuntimeError, EOFError):  # replaced while we read it
        return 0


@pytest.mark.parametrize("bad", [["seed=0", "seed=0"], ["seed=0", "seed=1 model.d_model=64"]])
def test_members_must_differ_in_seed_alone(tmp_path, bad):
    from ablate.errors import ConfigError

    cfgs = [_cfg(tmp_path / f"r{i}", 0, *b.split()) for i, b in enumerate(bad)]
    with pytest.raises(ConfigError):
        train_array(cfgs)
    assert not any(tmp_path.iterdir())  # nothing written


def test_members_train_with_dropout_after_a_validation():
    """Lightning puts modules back in training mode after a validation by setting each submodule's ``training``;
    the members (run through a template that is no submodule) must train with dropout again, not stay in eval."""
    from ablate.data import build_task
    from ablate.data.members import stack_batches
    from ablate.train.fused_system import FusedSystem

    cfgs = [OmegaConf.to_container(_cfg(Path("unused"), s, "model.dropout=0.3"), resolve=True, enum_to_str=True)
            for s in (0, 1)]
    system = FusedSystem(cfgs)
    task = build_task(_cfg(Path("unused"), 0))
    task.setup("fit")
    batch = stack_batches([next(iter(task.train_dataloader()))] * 2, 0)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    forward = system.model.vmap(lambda model, member: model(**member))
    system.eval()
    with torch.no_grad():
        evaluated = forward(inputs)
        for module in system.modules():  # what Lightning's loop does once validation is over
            module.training = True
        first, second = forward(inputs), forward(inputs)
    assert not torch.equal(first, second) and not torch.equal(first, evaluated)  # dropout draws again


def test_each_member_logs_its_own_wandb_run(tmp_path, monkeypatch):
    """Each member is a W&B run of its own (offline, no key), in its run directory, with its own id and history:
    the dashboard sees ordinary runs."""
    import wandb

    from tests.runs.test_wandb import _no_credentials
    from tests.runs.wandb_records import RunLog

    _no_credentials(monkeypatch, tmp_path / "home")
    monkeypatch.chdir(tmp_path)
    members = [_cfg(tmp_path / f"runs/s{s}", s, "logger=wandb", "wandb.group=g", f"wandb.name=seed{s}")
               for s in (0, 1)]
    train_array(members)
    wandb.teardown()  # wandb-core writes a finished run's file in the background; wait for it
    logs = {s: [RunLog(next(d.glob("run-*.wandb"))) for d in (tmp_path / f"runs/s{s}/wandb").glob("offline-run-*")]
            for s in (0, 1)}
    assert [len(v) for v in logs.values()] == [1, 1]
    (a,), (b,) = logs[0], logs[1]
    assert a.run.run_id != b.run.run_id and (a.run.display_name, b.run.display_name) == ("seed0", "seed1")
    for s, log in ((0, a), (1, b)):
        history = {int(h["step"]): h["val/loss"] for h in log.history if "val/loss" in h}
        progress = read_json(tmp_path / f"runs/s{s}/progress.json")["history"]["val/loss"]
        assert history == {step: value for step, value in progress}
        assert log.summary["status"] == "finished" and log.summary["step"] == STEPS


def test_a_stop_request_stops_one_member(tmp_path):
    """Hyperband's STOP in one member's directory ends that member (``stopped``, with the reason); the others train
    to the end."""
    members = [_cfg(tmp_path / f"runs/s{s}", s) for s in (0, 1)]
    (tmp_path / "runs/s1").mkdir(parents=True)
    (tmp_path / "runs/s1/STOP").write_text("hyperband: worse than the others at step 1\n")
    train_array(members)
    stopped, finished = read_result(tmp_path / "runs/s1"), read_result(tmp_path / "runs/s0")
    assert stopped["status"] == "stopped" and stopped["stopped_because"].startswith("hyperband")
    assert stopped["step"] == 1
    assert finished["status"] == "finished" and finished["step"] == STEPS


def test_a_config_that_does_not_fuse_is_refused(tmp_path):
    from ablate.errors import ConfigError

    cfgs = [_cfg(tmp_path / f"r{s}", s, "trainer.compile=true") for s in (0, 1)]
    with pytest.raises(ConfigError, match="trainer.compile=true"):
        train_array(cfgs)
    assert not any(tmp_path.iterdir())


def test_an_array_never_trains_a_finished_member_again(tmp_path):
    from ablate.errors import ConfigError

    train(_cfg(tmp_path / "runs/s0", 0))
    before = (tmp_path / "runs/s0/result.json").read_text()
    with pytest.raises(ConfigError, match="not yet trained"):
        train_array([_cfg(tmp_path / f"runs/s{s}", s) for s in (0, 1)])
    assert (tmp_path / "runs/s0/result.json").read_text() == before and not (tmp_path / "runs/s1").exists()


def test_a_member_final_train_loss_is_its_last_window_when_max_steps_is_a_multiple_of_log_every(tmp_path):
    """max_steps 24, log_every 4: the last log is the window of steps 21-24, not a mean over the empty window after
    it (which recorded 0.0). And the temporary files an earlier attempt's cut writes left are gone."""
    from ablate.runs.files import read_metrics

    from ablate.train.array import array_dir_of
    from ablate.train.preflight import make_run_dir

    assert STEPS % 4 == 0 and "train.log_every=4" in COMMON
    cfgs = [_cfg(tmp_path / f"runs/s{s}", s) for s in (0, 1)]
    for cfg in cfgs:  # the members' folders, as an attempt killed before its first checkpoint left them
        make_run_dir(cfg)
    cut = [array_dir_of(cfgs) / ".last.ckpt.x1y2.tmp", tmp_path / "runs/s0/checkpoints/.best.ckpt.a1b2.tmp",
           tmp_path / "runs/s1/.result.json.c3d4.tmp"]  # what writes cut short by a kill leave
    for path in cut:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"cut")
    run_dirs = train_array(cfgs)
    assert not [p for p in cut if p.exists()]
    for run_dir in run_dirs:
        rows = [r for r in read_metrics(run_dir) if "train/loss" in r]
        assert [int(r["step"]) for r in rows] == list(range(4, STEPS + 1, 4))
        final = read_result(run_dir)["final"]["train/loss"]
        assert final == rows[-1]["train/loss"] > 0


@pytest.mark.parametrize("status, refused", [("interrupted", True), ("running", True), ("finished", False),
                                             ("failed", False)])
def test_a_member_not_ended_is_never_resumed_as_a_solo_run(tmp_path, status, refused):
    """Its last.ckpt holds its weights only (a solo resume failed on KeyError 'pytorch-lightning_version'): ablate
    train refuses it, naming its array; an ended member is left to the ordinary checks."""
    from ablate.errors import ConfigError
    from ablate.train.preflight import check_not_an_array_member

    previous = {"status": status, "fused": {"members": 3, "index": 1, "array": "sweeps/t/arrays/abc"}}
    if refused:
        with pytest.raises(ConfigError, match="sweeps/t/arrays/abc"):
            check_not_an_array_member(tmp_path, previous)
    else:
        check_not_an_array_member(tmp_path, previous)
    check_not_an_array_member(tmp_path, {"status": "interrupted"})  # a solo run's


def test_an_array_checkpoint_from_before_bad_loss_was_kept_loads():
    """Array checkpoints written before the members' bad loss was kept (``bad_loss``) still resume: Lightning calls
    ``on_load_checkpoint`` before it loads weights strictly, and the hook gives the missing buffer a fresh value."""
    from ablate.train.fused_system import FusedSystem

    cfgs = [OmegaConf.to_container(_cfg(Path("unused"), s), resolve=True, enum_to_str=True) for s in (0, 1)]
    written, resumed = FusedSystem(cfgs), FusedSystem(cfgs)
    old = {"state_dict": {k: v for k, v in written.state_dict().items() if k != "bad_loss"}}
    with pytest.raises(RuntimeError, match="bad_loss"):
        resumed.load_state_dict(old["state_dict"])  # what a strict load of the old checkpoint did without the hook
    resumed.on_load_checkpoint(old)
    resumed.load_state_dict(old["state_dict"])
    assert torch.equal(resumed.bad_loss, torch.zeros(2))
