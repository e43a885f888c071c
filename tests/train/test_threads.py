"""trainer.threads: a lone run takes every core it may use unless told, a sweep's run its pool's share, and it says
how many it took; a bad count is one line naming the key."""

from __future__ import annotations

import json
import os

import pytest
import torch

from ablate.cli import main
from ablate.errors import ConfigError
from ablate.runs.files import config_hash
from ablate.train.threads import resolve_threads
from tests.conftest import REPO, TINY


@pytest.fixture(autouse=True)
def keep_torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_null_takes_the_pool_s_share_else_every_core_this_process_may_use(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert resolve_threads(None)[0] == 3 and resolve_threads(2)[0] == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert resolve_threads(None)[0] == len(os.sched_getaffinity(0))
    for bad in (0, -1, True):
        with pytest.raises(ConfigError, match=r"trainer\.threads=.* is not allowed; expected a positive whole number"):
            resolve_threads(bad)


def test_a_lone_run_says_how_many_threads_it_took_and_records_them(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    args = ["train", str(REPO / "configs/default.yaml"), *TINY, "trainer.enable_progress_bar=false",
            "train.max_steps=2", "train.val_every=2", "trainer.threads=1", f"output_dir={tmp_path / 'run'}"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "ablate: training with 1 CPU thread (trainer.threads)" in err.splitlines()
    assert json.loads((tmp_path / "run" / "result.json").read_text())["threads"] == 1


def test_a_bad_count_is_refused_before_anything_is_written(tmp_path, capsys):
    assert main(["train", *TINY, "trainer.threads=0", f"output_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ablate: error: ") and "trainer.threads=0" in err and not (tmp_path / "run").exists()


def test_the_thread_count_is_not_part_of_a_run_s_identity():
    import ablate

    cfg = ablate.load_config(REPO / "configs/default.yaml")
    assert config_hash(cfg) == config_hash(ablate.load_config(REPO / "configs/default.yaml", ["trainer.threads=1"]))
