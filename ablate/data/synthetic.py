"""Synthetic tasks, generated in code: seeded, offline, variable length.

Sequence to sequence: ``reverse`` (the embedded default) cannot be learned without position
information: the encoder output is a set, so only positions tell the decoder which token comes next.
``sort`` is a set function and needs no positions: a control. ``copy`` sits in between (the causal
decoder can count).

Language modelling: ``random_lm`` is i.i.d. uniform tokens, which no model can predict: its
validation loss cannot go below log(K) nats for K symbols. A loss below that means the model sees
the labels it is scored on: the label-leak check of every mask.

Symbols are ids ``3 .. vocab_size-1``; 0, 1, 2 are pad, BOS and EOS.
"""

from __future__ import annotations

import itertools
from typing import Callable

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from ablate.data.collate import Seq2SeqCollator, stack_lm
from ablate.data.sampler import ShuffledBatches
from ablate.data.symbols import Symbols
from ablate.data.task import Task
from ablate.errors import ConfigError

Transform = Callable[[list[int]], list[int]]
TRANSFORMS: dict[str, Transform] = {"reverse": lambda s: s[::-1], "copy": list, "sort": sorted}


class _Synthetic(Task, pl.LightningDataModule):
    """Shared by the synthetic tasks: the symbol range, the generator, and seeded batches of data.batch_size."""

    def __init__(self, data: DictConfig, seed: int, *, n_train: int, n_val: int):
        super().__init__()
        self.first_symbol = max(data.pad_id, data.bos_id, data.eos_id) + 1
        if data.vocab_size - self.first_symbol < 2:
            raise ConfigError("data.vocab_size", data.vocab_size,
                              f"at least {self.first_symbol + 2} for a synthetic task")
        for key, n in (("n_train", n_train), ("n_val", n_val)):
            if n < 1:
                raise ConfigError(f"data.task_args.{key}", n, "a positive integer")
        self.cfg, self.seed, self.n_train, self.n_val = data, seed, n_train, n_val
        self.symbol_text = Symbols(self.first_symbol, data.vocab_size, pad_id=data.pad_id, bos_id=data.bos_id,
                                   eos_id=data.eos_id)  # its text, for ablate generate and attention

    def symbols(self, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
        return torch.randint(self.first_symbol, self.cfg.vocab_size, shape, generator=g)

    def _loader(self, examples: list, train: bool) -> DataLoader:
        rank, world = self.rank()
        sampler = ShuffledBatches(len(examples), self.cfg.batch_size, shuffle=train, seed=self.seed, rank=rank,
                                  world_size=world, drop_last=train)
        return self.batch_loader(examples, sampler, self.collate, train=train)

    def setup(self, stage: str | None = None) -> None:
        if not hasattr(self, "train_set"):
            self.train_set = self.examples(self.n_train, self.seed)
            self.val_set = self.examples(self.n_val, self.seed + 1_000_003)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, train=False)

    test_dataloader = val_dataloader


class SyntheticSeq2Seq(_Synthetic):
    """Random symbol strings of length ``min_len .. data.max_len`` and a transform of each."""

    def __init__(self, data: DictConfig, seed: int, transform: Transform, *, min_len: int, n_train: int, n_val: int):
        super().__init__(data, seed, n_train=n_train, n_val=n_val)
        if not 1 <= min_len <= data.max_len:
            raise ConfigError("data.task_args.min_len", min_len, f"an integer in [1, data.max_len={data.max_len}]")
        self.transform, self.min_len = transform, min_len
        self.collate = Seq2SeqCollator(data.pad_id, data.bos_id, data.eos_id)

    @property
    def longest(self) -> int:
        return int(self.cfg.max_len) + 1  # a target of max_len symbols after the decoder's BOS

    def examples(self, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
        """``n`` (source, target) pairs: the lengths drawn first, then every string's symbols in one draw (the CPU
        generator draws a tensor's elements one after another, so these are the numbers one draw per string gave:
        tests/data/test_synthetic.py)."""
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(self.min_len, self.cfg.max_len + 1, (n,), generator=g).tolist()  # (N,)
        flat = self.symbols((sum(lengths),), g).tolist()  # (sum of lengths,): the strings one after another
        ends = itertools.accumulate(lengths)
        return [(src, self.transform(src)) for src in (flat[end - t:end] for t, end in zip(lengths, ends))]


class RandomTokensLM(_Synthetic):
    """Blocks of ``data.max_len`` i.i.d. uniform symbols for a decoder-only model: ``ids`` and ``labels``
    shifted by one."""

    collate = staticmethod(stack_lm)

    def examples(self, n: int, seed: int) -> list[dict[str, torch.Tensor]]:
        block = self.symbols((n, self.cfg.max_len + 1), torch.Generator().manual_seed(seed))  # (N, T + 1)
        return [{"ids": row[:-1], "labels": row[1:]} for row in block]

    @property
    def entropy(self) -> float:
        """log(K) nats: the loss of predicting a uniform choice among the K symbols, which nothing beats."""
        return float(torch.log(torch.tensor(float(self.cfg.vocab_size - self.first_symbol))))
