"""Synthetic sequence-to-sequence tasks, generated in code: seeded, offline, variable length.

``reverse`` (the embedded default) cannot be learned without position
information: the encoder output is a set, so only positions tell the decoder
which token comes next. ``sort`` is a set function and needs no positions: a
control. ``copy`` sits in between (the causal decoder can count).
Symbols are ids ``3 .. vocab_size-1``; 0, 1, 2 are pad, BOS and EOS.
"""

from __future__ import annotations

from typing import Callable

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from ablate.data.collate import Seq2SeqCollator
from ablate.errors import ConfigError
from ablate.registry import register

Transform = Callable[[list[int]], list[int]]


class SyntheticSeq2Seq(pl.LightningDataModule):
    """Random symbol strings of length ``min_len .. data.max_len`` and a transform of each."""

    def __init__(self, data: DictConfig, seed: int, transform: Transform, *, min_len: int, n_train: int, n_val: int):
        super().__init__()
        first = max(data.pad_id, data.bos_id, data.eos_id) + 1
        if data.vocab_size - first < 2:
            raise ConfigError("data.vocab_size", data.vocab_size, f"at least {first + 2} for a synthetic task")
        if not 1 <= min_len <= data.max_len:
            raise ConfigError("data.task_args.min_len", min_len, f"an integer in [1, data.max_len={data.max_len}]")
        self.cfg, self.seed, self.transform = data, seed, transform
        self.first_symbol, self.min_len, self.n_train, self.n_val = first, min_len, n_train, n_val
        self.collate = Seq2SeqCollator(data.pad_id, data.bos_id, data.eos_id)

    def _examples(self, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(self.min_len, self.cfg.max_len + 1, (n,), generator=g)
        out = []
        for length in lengths.tolist():
            src = torch.randint(self.first_symbol, self.cfg.vocab_size, (length,), generator=g).tolist()
            out.append((src, self.transform(src)))
        return out

    def setup(self, stage: str | None = None) -> None:
        if not hasattr(self, "train_set"):
            self.train_set = self._examples(self.n_train, self.seed)
            self.val_set = self._examples(self.n_val, self.seed + 1_000_003)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.cfg.batch_size, shuffle=True, collate_fn=self.collate)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.cfg.batch_size, collate_fn=self.collate)

    test_dataloader = val_dataloader


def _task(transform: Transform) -> Callable[..., SyntheticSeq2Seq]:
    def factory(*, data: DictConfig, seed: int, min_len: int = 1, n_train: int = 20000, n_val: int = 1000):
        return SyntheticSeq2Seq(data, seed, transform, min_len=min_len, n_train=n_train, n_val=n_val)

    return factory


register("task", "reverse", "reverse a random string: impossible without position information")(_task(lambda s: s[::-1]))
register("task", "copy", "copy a random string")(_task(list))
register("task", "sort", "sort a random string: a set function, needs no positions (control)")(_task(sorted))
