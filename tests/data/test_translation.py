"""The parallel_text task on a slice of Multi30k: batch layout, token budget, length filter, errors."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.config.schema import run_schema
from ablate.data.batching import TokenBatchSampler
from ablate.data.translation import ParallelText
from ablate.errors import ConfigError

MAX_TOKENS, MAX_LEN = 2000, 40


def data_config(path, cache_dir, **overrides) -> DictConfig:
    fields = dict(
        task="parallel_text",
        path=str(path),
        vocab_size=500,
        limit_train=2000,
        limit_val=300,
        max_tokens=MAX_TOKENS,
        max_len=MAX_LEN,
        cache_dir=str(cache_dir),
    )
    return OmegaConf.merge(run_schema().data, {**fields, **overrides})


@pytest.fixture(scope="module")
def dm(shared_data, tmp_path_factory) -> ParallelText:
    data = data_config(shared_data / "multi30k", tmp_path_factory.mktemp("cache"))
    module = registry.create("task", "parallel_text", {"data": data, "seed": 0})
    module.prepare_data()
    module.setup("fit")
    return module


def test_batches_have_the_collator_layout(dm):
    pad, bos, eos = 0, 1, 2
    for batch in dm.train_dataloader():
        assert set(batch) == {"src_ids", "tgt_ids", "labels"}
        src, tgt, labels = batch["src_ids"], batch["tgt_ids"], batch["labels"]  # (B, S), (B, T), (B, T)
        assert src.dtype == tgt.dtype == torch.long and tgt.shape == labels.shape and src.shape[0] == tgt.shape[0]
        assert src.shape[0] * max(src.shape[1], tgt.shape[1]) <= MAX_TOKENS
        n_src, n_tgt = (src != pad).sum(1), (labels != pad).sum(1)  # (B,), (B,) = |y| + 1
        positions = torch.arange(tgt.shape[1])
        assert torch.equal(src != pad, positions[: src.shape[1]] < n_src[:, None])  # padding only at the end
        assert torch.equal(labels != pad, positions < n_tgt[:, None])
        assert torch.equal(tgt != pad, labels != pad)
        assert (tgt[:, 0] == bos).all()
        assert (labels.gather(1, n_tgt[:, None] - 1) == eos).all()
        assert ((labels == eos).sum(1) == 1).all() and not ((src == bos) | (src == eos)).any()
        y = tgt[:, 1:] != pad  # (B, T - 1): the target words, shifted by one between the two
        assert torch.equal(tgt[:, 1:][y], labels[:, :-1][y])


def test_train_epoch_covers_the_filtered_pairs_once(dm):
    train = dm.encoded("train")
    assert 0 < len(train) < 2000  # limit_train, then the length filter
    assert max(train["src_len"]) <= MAX_LEN and max(train["tgt_len"]) + 1 <= MAX_LEN
    loader = dm.train_dataloader()
    n = sum(batch["src_ids"].shape[0] for batch in loader)
    assert n == len(train) == len({i for b in loader.sampler for i in b})


def test_epochs_shuffle_differently(dm):
    loader = dm.train_dataloader()
    first = list(loader.sampler)
    loader.sampler.set_epoch(1)
    assert list(loader.sampler) != first
    assert list(dm.train_dataloader().sampler) == first  # same seed, same epoch


@pytest.mark.filterwarnings("ignore:You passed in a `val_dataloader`")
def test_lightning_sets_the_epoch_and_keeps_the_sampler(dm):
    shapes: dict[int, list[tuple[int, ...]]] = {0: [], 1: []}

    class Probe(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, _):
            shapes[self.current_epoch].append(tuple(batch["src_ids"].shape))
            return self.w * batch["src_ids"].float().mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = pl.Trainer(
        max_epochs=2,
        limit_train_batches=4,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Probe(), datamodule=dm)
    assert isinstance(trainer.train_dataloader.sampler, TokenBatchSampler)
    assert trainer.train_dataloader.sampler.epoch == 1
    assert len(shapes[0]) == len(shapes[1]) == 4 and shapes[0] != shapes[1]


def test_val_batches_map_back_to_the_raw_text(dm):
    sources, references = dm.sources("val"), dm.references("val")
    order = dm.example_order("val")
    assert len(sources) == len(references) == 300 and sorted(order) == list(range(300))
    assert sources[0] == "A group of men are loading cotton onto a truck"
    rows = [row for batch in dm.val_dataloader() for row in batch["src_ids"]]
    for row, index in zip(rows[:20], order):
        assert dm.tokenizer.decode(row.tolist()) == sources[index]


def test_lines_are_stripped_and_whitespace_normalised(tmp_path):
    (tmp_path / "train.en").write_text(" Two\u00a0dogs \n", encoding="utf-8")
    (tmp_path / "train.de").write_text("Zwei\tHunde  laufen.\n", encoding="utf-8")
    dm = registry.create("task", "parallel_text", {"data": data_config(tmp_path, tmp_path / "cache"), "seed": 0})
    assert (dm.sources("train"), dm.references("train")) == (["Two dogs"], ["Zwei Hunde laufen."])


def test_tokenizer_is_shared_and_sized(dm):
    assert dm.tokenizer.vocab_size == 500
    assert dm.tokenizer.decode(dm.tokenizer.encode("Ein Hund läuft.")) == "Ein Hund läuft."


def test_missing_folder_is_a_config_error(tmp_path):
    data = data_config(tmp_path / "nowhere", tmp_path)
    with pytest.raises(ConfigError, match=r"data.path=.*nowhere"):
        registry.create("task", "parallel_text", {"data": data, "seed": 0})


def test_missing_split_names_the_key_and_what_exists(tmp_path):
    (tmp_path / "train.en").write_text("a\n")
    (tmp_path / "train.de").write_text("b\n")
    dm = registry.create(
        "task", "parallel_text", {"data": data_config(tmp_path, tmp_path / "cache"), "seed": 0}, {"val_split": "dev"}
    )
    with pytest.raises(ConfigError, match=r"data.task_args.val_split='dev'.*found: train.de, train.en"):
        dm.setup("validate")


def test_misaligned_files_are_a_config_error(tmp_path):
    (tmp_path / "train.en").write_text("a\nb\n")
    (tmp_path / "train.de").write_text("c\n")
    dm = registry.create("task", "parallel_text", {"data": data_config(tmp_path, tmp_path / "cache"), "seed": 0})
    with pytest.raises(ConfigError, match="aligned"):
        _ = dm.tokenizer


def test_length_buckets_give_one_training_shape_per_bucket_and_leave_validation_as_it_was(dm, shared_data, tmp_path):
    data = data_config(shared_data / "multi30k", tmp_path, length_bucket=16)
    module = registry.create("task", "parallel_text", {"data": data, "seed": 0})
    module.setup("fit")
    shapes = {tuple(b["src_ids"].shape) for b in module.train_dataloader()}
    assert shapes == {tuple(b["tgt_ids"].shape) for b in module.train_dataloader()}
    assert shapes <= {(MAX_TOKENS // L, L) for L in range(16, MAX_LEN + 17, 16)}
    for a, b in zip(module.val_dataloader(), dm.val_dataloader()):
        assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("value", [0, -16, 2.5, "16"])
def test_a_bad_length_bucket_is_refused_naming_the_key(value, shared_data, tmp_path):
    fields = OmegaConf.to_container(data_config(shared_data / "multi30k", tmp_path))
    data = OmegaConf.create({**fields, "length_bucket": value})  # untyped: the task checks the value itself
    with pytest.raises(ConfigError, match="data.length_bucket"):
        registry.create("task", "parallel_text", {"data": data, "seed": 0})
