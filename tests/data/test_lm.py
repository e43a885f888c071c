"""The text_lm task on Tiny Shakespeare: shifted labels, blocks from the stream, a deterministic split."""

from __future__ import annotations

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.config.schema import run_schema
from ablate.data.lm import TextLM
from ablate.errors import ConfigError

T, B = 32, 4


def data_config(path, cache_dir, **overrides) -> DictConfig:
    fields = dict(task="text_lm", path=str(path), vocab_size=200, max_len=T, batch_size=B, cache_dir=str(cache_dir))
    return OmegaConf.merge(run_schema().data, {**fields, **overrides})


def make(data: DictConfig, **task_args) -> TextLM:
    return registry.create("task", "text_lm", {"data": data, "seed": 0}, task_args)


@pytest.fixture(scope="module")
def text(shared_data):
    return shared_data / "tinyshakespeare" / "input.txt"


@pytest.fixture(scope="module")
def dm(text, tmp_path_factory) -> TextLM:
    module = make(data_config(text, tmp_path_factory.mktemp("cache")))
    module.prepare_data()
    module.setup("fit")
    return module


def test_labels_are_ids_shifted_by_one(dm):
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"ids", "labels"}
    ids, labels = batch["ids"], batch["labels"]  # (B, T), (B, T)
    assert ids.shape == labels.shape == (B, T) and ids.dtype == torch.long
    assert torch.equal(ids[:, 1:], labels[:, :-1])


def test_blocks_are_contiguous_chunks_of_the_stream(dm):
    stream, blocks = dm.stream("val"), dm.blocks("val")
    assert len(blocks) == (len(stream) - 1) // T
    val = next(iter(dm.val_dataloader()))
    for i in range(B):
        assert torch.equal(val["ids"][i], stream[i * T : (i + 1) * T])
        assert torch.equal(val["labels"][i], stream[i * T + 1 : (i + 1) * T + 1])


def test_split_is_deterministic_and_by_rows(dm, text, tmp_path):
    lines = text.read_text(encoding="utf-8").splitlines()
    n_train = int(len(lines) * 0.9)
    eos = dm.tokenizer.eos_id
    assert int((dm.stream("train") == eos).sum()) == n_train  # one EOS per line
    assert int((dm.stream("val") == eos).sum()) == len(lines) - n_train
    assert dm.decode_text(dm.stream("val")[:60]).startswith("\n".join(lines[n_train : n_train + 2]))
    again = make(data_config(text, dm.cfg.cache_dir))
    assert again.tokenizer.from_cache
    assert torch.equal(again.stream("val"), dm.stream("val"))


def test_training_order_is_seeded(dm):
    first = [next(iter(dm.train_dataloader()))["ids"] for _ in range(2)]
    assert torch.equal(first[0], first[1])
    assert not torch.equal(first[0], next(iter(dm.val_dataloader()))["ids"])


def test_limits_cap_the_number_of_blocks(text, tmp_path):
    dm = make(data_config(text, tmp_path, limit_train=10, limit_val=3))
    assert (len(dm.blocks("train")), len(dm.blocks("val"))) == (10, 3)
    assert sum(b["ids"].shape[0] for b in dm.train_dataloader()) == 10


def test_bad_inputs_are_config_errors(text, tmp_path):
    with pytest.raises(ConfigError, match="data.path"):
        make(data_config(tmp_path / "missing.txt", tmp_path))
    with pytest.raises(ConfigError, match="train_fraction"):
        make(data_config(text, tmp_path), train_fraction=1.0)
