"""W&B logging, checked against the offline ``.wandb`` files wandb itself writes (no server, no mocks of wandb)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import pytorch_lightning as pl
import wandb
from omegaconf import OmegaConf

import ablate
from ablate.errors import ConfigError
from ablate.runs import files as wb_files
from ablate.runs import wandb as wb
from ablate.runs import wandb_offline as offline
from ablate.train import run as run_module
from ablate.train.run import train
from tests.conftest import TINY
from tests.runs.wandb_records import RunLog

FAST = ["train.max_steps=6", "train.val_every=3", "train.log_every=2", "trainer.enable_progress_bar=false"]
WANDB = ["logger=wandb", "wandb.group=mysweep", "wandb.name=h4", "wandb.tags=[a,b]", "output_dir=run"]
KEY = "k" * 40  # the shape of a W&B API key; nothing ever sends it
AUTH_ENV = ("WANDB_MODE", "WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_BASE_URL", "WANDB_RUN_ID", "NETRC")


def _no_credentials(mp: pytest.MonkeyPatch, home: Path) -> None:
    for name in AUTH_ENV:
        mp.delenv(name, raising=False)
    mp.setenv("HOME", str(home))  # no real ~/.netrc; wandb's own logs (~/.cache/wandb) land here too


@pytest.fixture
def no_credentials(monkeypatch, tmp_path_factory) -> None:
    _no_credentials(monkeypatch, tmp_path_factory.mktemp("home"))


class _InterruptAt(pl.Callback):
    """Ctrl+C as step ``step`` begins (after the checkpoint of the validation before it)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer, *args) -> None:
        if trainer.global_step == self.step:
            raise KeyboardInterrupt


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory) -> Path:
    """A tiny 9-step run with ``logger=wandb`` and no API key, interrupted at step 6 and resumed to the end;
    the working folder it ran in."""
    work = tmp_path_factory.mktemp("work")
    cfg = ablate.load_config(None, TINY + FAST + WANDB + ["train.max_steps=9"])
    sigint = signal.getsignal(signal.SIGINT)
    with pytest.MonkeyPatch.context() as mp:
        _no_credentials(mp, tmp_path_factory.mktemp("home"))
        mp.chdir(work)
        make_trainer = run_module.make_trainer
        mp.setattr(run_module, "make_trainer",
                   lambda c, d, callbacks, **kw: make_trainer(c, d, callbacks + [_InterruptAt(6)], **kw))
        with pytest.raises(SystemExit):  # Lightning's answer to Ctrl+C
            train(cfg)
        signal.signal(signal.SIGINT, sigint)  # Lightning ignores a second Ctrl+C while it shuts down
        mp.setattr(run_module, "make_trainer", make_trainer)
        train(cfg)
        wandb.teardown()  # wandb-core writes a finished run's .wandb file in the background; wait for it
    return work


def _segments(work: Path) -> list[RunLog]:
    """The run's offline W&B runs, oldest first: one per training attempt."""
    return [RunLog(next(d.glob("run-*.wandb"))) for d in sorted((work / "run" / "wandb").glob("offline-run-*"))]


def test_a_run_without_an_api_key_logs_offline_into_its_run_dir_only(resumed_run):
    assert sorted(os.listdir(resumed_run)) == ["run"]  # no ./wandb, nothing else in the working folder
    assert len(_segments(resumed_run)) == 2


def test_the_wandb_run_carries_group_name_tags_and_the_flat_config(resumed_run):
    log = _segments(resumed_run)[0]
    assert ((log.run.run_group, log.run.display_name, list(log.run.tags), log.run.job_type)
            == ("mysweep", "h4", ["a", "b"], "train"))
    assert log.run.project == "ablate"
    assert log.config["model.n_heads"] == 4 and log.config["model.d_model"] == 32
    assert log.config["train.schedule_args.warmup"] == 4000 and log.config["train.betas"] == [0.9, 0.98]
    assert log.config["logger"] == "wandb" and log.config["model.arch"] == "encoder_decoder"
    assert log.config["params/total"] == json.loads((resumed_run / "run" / "result.json").read_text())["parameters"]
    assert "config" not in log.config  # Lightning's nested copy of the same config is left out


def test_history_is_logged_at_the_steps_done_as_result_json_counts_them(resumed_run):
    """val_every=3: the validations after 3 and 6 steps are at steps 3 and 6 (Lightning passes 2 and 5), W&B's own
    _step is the same number, and the last row of a 9-step run is step 9, result.json's step."""
    first, second = _segments(resumed_run)
    assert [row["step"] for row in first.history if "val/loss" in row] == [3, 6]
    assert [row["step"] for row in second.history if "val/loss" in row] == [3, 6, 9]
    assert all(row["_step"] == row["step"] for log in (first, second) for row in log.history)
    assert second.history[-1]["step"] == json.loads((resumed_run / "run" / "result.json").read_text())["step"] == 9
    assert any("train/loss" in row for row in first.history)
    assert not any("trainer/global_step" in row for log in (first, second) for row in log.history)


def test_summaries_are_defined_and_the_outcome_is_in_the_summary(resumed_run):
    log = _segments(resumed_run)[0]
    loss = log.metrics["val/loss"]
    assert loss.summary.min and not loss.summary.max and loss.step_metric == wb.STEP_METRIC == "step"
    assert log.metrics["val/acc"].summary.max and log.metrics["test/bleu"].summary.max
    val_losses = [row["val/loss"] for row in log.history if "val/loss" in row]
    assert log.summary["val/loss"] == {"min": min(val_losses)}
    assert log.summary["best/val/loss"] == pytest.approx(min(val_losses))
    assert log.summary["status"] == "interrupted" and log.summary["step"] == 6
    assert log.summary["parameters"] > 0 and log.summary["tokens_per_s"] > 0 and log.summary["wall_time_s"] > 0
    assert "exit" in log.kinds()  # the run was finished, not left to exit hooks
    assert _segments(resumed_run)[1].summary["status"] == "finished"


def test_a_resumed_run_dir_continues_the_same_wandb_run(resumed_run):
    first, second = _segments(resumed_run)
    stored = (resumed_run / "run" / "wandb" / "ablate-run-id").read_text().strip()
    assert first.run.run_id == second.run.run_id == stored
    assert second.config["train.max_steps"] == 9
    assert second.summary["step"] == 9


def test_a_killed_and_resumed_run_syncs_one_history_with_each_step_once(resumed_run):
    """Offline, wandb cannot resume: the resumed attempt's folder holds the whole history (the rows of the steps
    before its checkpoint logged again, as the CSV logger has them), each step once, and the first attempt's folder
    is superseded: ablate sync uploads the second alone."""
    first, second = _segments(resumed_run)
    steps = [row["_step"] for row in second.history]
    csv: dict[int, dict] = {}  # the CSV logger's rows, merged by step
    for r in wb_files.read_metrics(resumed_run / "run"):
        csv.setdefault(int(r["step"]), {}).update(r)
    assert steps == sorted(set(steps)) == sorted(csv) and steps[-1] == 9  # each logged step once, in order
    for row in second.history:  # every value is the one the CSV logger got at that step
        assert all(csv[row["step"]][k] == v for k, v in row.items() if k in csv[row["step"]])
        assert {k for k in row if not k.startswith("_")} == set(csv[row["step"]])
    for row in first.history:  # and the first attempt's rows, of the steps before its checkpoint, are all there
        same = next(r for r in second.history if r["step"] == row["step"])
        assert row["step"] > 6 or all(same[k] == v for k, v in row.items() if not k.startswith("_"))
    folders = sorted((resumed_run / "run" / "wandb").glob("offline-run-*"))
    assert offline.offline_runs([resumed_run / "run"]) == folders[1:]


def test_scores_from_after_training_join_the_same_wandb_run(resumed_run, no_credentials, tmp_path):
    run_dir = Path(shutil.copytree(resumed_run / "run", tmp_path / "run"))  # the shared run keeps its 2 segments
    cfg = ablate.load_config(run_dir / "config.yaml")
    assert wb.record_scores(cfg, run_dir, {"test/bleu": 12.5, "test/bleu_signature": "nrefs:1|tok:13a"})
    wandb.teardown()
    *training, scores = _segments(tmp_path)
    assert scores.run.run_id == training[0].run.run_id and len(training) == 2
    assert scores.summary["test/bleu"] == 12.5 and scores.summary["test/bleu_signature"] == "nrefs:1|tok:13a"
    assert not wb.record_scores(OmegaConf.merge(cfg, {"logger": "none"}), run_dir, {"test/bleu": 1.0})


def test_auto_mode_is_offline_without_a_key(no_credentials):
    assert wb.resolve_mode("auto") == "offline"
    assert not wb.has_api_key()


def test_auto_mode_is_online_with_an_api_key(no_credentials, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    assert wb.resolve_mode("auto") == "online"


def test_auto_mode_is_online_with_a_netrc_entry_for_the_wandb_host(no_credentials):
    netrc = Path.home() / ".netrc"
    netrc.write_text(f"machine api.wandb.ai\n  login user\n  password {KEY}\n")
    netrc.chmod(0o600)
    assert wb.resolve_mode("auto") == "online"


@pytest.mark.parametrize("env, mode", [("disabled", "disabled"), ("offline", "offline"), ("dryrun", "offline"),
                                       ("online", "online")])
def test_auto_mode_follows_wandb_mode(no_credentials, monkeypatch, env, mode):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.setenv("WANDB_MODE", env)
    assert wb.resolve_mode("auto") == mode


def test_an_explicit_mode_wins(no_credentials, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.setenv("WANDB_MODE", "online")
    assert wb.resolve_mode("offline") == "offline" and wb.resolve_mode("disabled") == "disabled"


def test_bad_modes_are_config_errors(no_credentials, monkeypatch):
    with pytest.raises(ConfigError, match=r"wandb.mode='sometimes'.*auto, online, offline, disabled") as err:
        wb.resolve_mode("sometimes")
    assert err.value.key == "wandb.mode"
    monkeypatch.setenv("WANDB_MODE", "loud")
    with pytest.raises(ConfigError, match="environment: WANDB_MODE='loud'"):
        wb.resolve_mode("auto")


def test_flatten_gives_every_leaf_under_its_dotted_key():
    cfg = ablate.load_config(None, TINY + ["model.ffn_args={bias: false}"])
    flat = wb.flatten(cfg)
    assert flat["model.n_heads"] == 4 and flat["train.schedule_args.warmup"] == 4000
    assert flat["train.betas"] == [0.9, 0.98] and flat["model.ffn_args.bias"] is False
    assert flat["logger"] == "none" and flat["model.arch"] == "encoder_decoder"  # enums as their names
    assert "model.positional_args" not in flat  # an empty mapping has no leaves
    rebuilt: dict = {}
    for key, value in flat.items():  # nesting the keys again gives the config back
        *parents, leaf = key.split(".")
        node = rebuilt
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    full = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert (OmegaConf.merge(full, rebuilt) == OmegaConf.create(full)
            and not any(isinstance(v, dict) for v in flat.values()))


def test_log_table_writes_a_report_run_with_the_table(no_credentials, in_tmp):
    wb.log_table(project="ablate", entity=None, group="mysweep", name="table 3", columns=["variant", "val/ppl"],
                 rows=[["base", 4.92], ["h=1", 5.29]], save_dir=in_tmp / "report")
    wandb.teardown()
    assert sorted(os.listdir(in_tmp)) == ["report"]
    run_dir = next((in_tmp / "report" / "wandb").glob("offline-run-*"))
    log = RunLog(next(run_dir.glob("run-*.wandb")))
    assert (log.run.job_type, log.run.run_group, log.run.display_name) == ("report", "mysweep", "table 3")
    (row,) = [r for r in log.history if "report/table" in r]
    table = json.loads((run_dir / "files" / row["report/table"]["path"]).read_text())
    assert table["columns"] == ["variant", "val/ppl"] and table["data"] == [["base", 4.92], ["h=1", 5.29]]


def test_every_report_of_a_sweep_folder_updates_its_one_report_run_in_place(no_credentials, in_tmp):
    """Three reports of one sweep folder: one offline folder to sync, holding the last table; another folder's group
    (another sweep folder of the same sweep name) has a report run of its own."""
    for rows in ([["base", 4.92]], [["base", 4.91]], [["base", 4.90]]):
        wb.log_table(project="ablate", entity=None, group="mysweep-1a2b3c4d", name="mysweep-report",
                     columns=["variant", "val/ppl"], rows=rows, save_dir=in_tmp / "report")
        wandb.teardown()
    (folder,) = offline.offline_runs([in_tmp / "report"])
    log = RunLog(next(folder.glob("run-*.wandb")))
    assert log.run.run_id == wb.report_run_id("ablate", None, "mysweep-1a2b3c4d")
    (row,) = [r for r in log.history if "report/table" in r]
    assert json.loads((folder / "files" / row["report/table"]["path"]).read_text())["data"] == [["base", 4.90]]
    assert wb.report_run_id("ablate", None, "mysweep-9f8e7d6c") != log.run.run_id


def test_log_table_takes_columns_of_mixed_types(no_credentials, in_tmp):
    """A report's columns mix numbers, text and blanks (varied 1 and auto, verdicts, intervals a base row lacks)."""
    rows = [["base", 1, None, "base"], ["h=1", "auto", 0.12, "no detectable difference"]]
    wb.log_table(project="ablate", entity=None, group="g", name="t",
                 columns=["variant", "devices", "ci_low", "verdict"], rows=rows, save_dir=in_tmp / "report")
    wandb.teardown()
    run_dir = next((in_tmp / "report" / "wandb").glob("offline-run-*"))
    (row,) = [r for r in RunLog(next(run_dir.glob("run-*.wandb"))).history if "report/table" in r]
    assert json.loads((run_dir / "files" / row["report/table"]["path"]).read_text())["data"] == rows


def _offline_run(root: Path, stamp: str, synced: bool = False) -> Path:
    run = root / "wandb" / f"offline-run-{stamp}-abc"
    run.mkdir(parents=True)
    (run / "run-abc.wandb").write_bytes(b"")
    if synced:
        (run / "run-abc.wandb.synced").write_bytes(b"")
    return run


@pytest.fixture
def no_subprocess(monkeypatch) -> list[list[str]]:
    """The ``wandb sync`` commands sync() runs; none is run (there is no W&B server here)."""
    calls: list[list[str]] = []
    real = subprocess.run

    def run(cmd, **kwargs):
        if list(cmd[1:4]) != ["-m", "wandb", "sync"]:
            return real(cmd, **kwargs)  # wandb's own calls, e.g. git while loading its settings
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", run)
    return calls


@pytest.fixture
def local_server(monkeypatch):
    """WANDB_BASE_URL pointed at a socket listening on 127.0.0.1 (connections open; nothing is ever answered)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.getsockname()[1]}")
        yield


def test_sync_uploads_pending_offline_runs_oldest_first(no_credentials, monkeypatch, tmp_path, no_subprocess,
                                                        local_server):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    later, earlier = _offline_run(tmp_path / "b", "20260102_000000"), _offline_run(tmp_path / "a", "20260101_000000")
    _offline_run(tmp_path / "c", "20260103_000000", synced=True)
    assert wb.sync([tmp_path]) == 0
    (cmd,) = no_subprocess
    assert cmd[1:4] == ["-m", "wandb", "sync"] and cmd[4:] == [str(earlier), str(later)]


def test_sync_without_a_key_or_without_runs_is_refused(no_credentials, tmp_path, no_subprocess):
    with pytest.raises(ConfigError, match="nothing to sync"):
        wb.sync([tmp_path])
    _offline_run(tmp_path, "20260101_000000")
    with pytest.raises(ConfigError, match=r"WANDB_API_KEY=None is not allowed; expected a W&B API key to sync 1"):
        wb.sync([tmp_path])
    assert no_subprocess == []


def test_sync_without_the_network_fails_fast_in_one_line(no_credentials, monkeypatch, tmp_path, no_subprocess,
                                                         capsys):
    """A key and no server to reach (a closed port on 127.0.0.1: no remote host is touched): one line on stderr naming
    the network and what sync needs, exit 1, within seconds, and wandb sync is not started."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")
    _offline_run(tmp_path, "20260101_000000")
    start = time.monotonic()
    assert wb.sync([tmp_path]) == 1
    assert time.monotonic() - start < offline.CONNECT_TIMEOUT + 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ablate: error: network unreachable: the W&B server "
                                                   f"http://127.0.0.1:{port} cannot be reached")
    assert "sync needs it and an API key" in err and no_subprocess == []


def test_a_server_that_never_answers_is_unreachable_within_the_timeout(monkeypatch):
    """A black-holed network (or a resolver that cannot be reached) never answers: the deadline holds for the name's
    lookup and the connection together."""
    never = threading.Event()

    def black_hole(*args, **kwargs):
        never.wait()  # released when the test ends, as the caller's socket would time out at last
        raise TimeoutError("timed out")

    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.invalid")
    monkeypatch.setattr(socket, "create_connection", black_hole)
    assert offline.server_unreachable(timeout=0.2) == "https://wandb.invalid cannot be reached (timed out)"
    never.set()
