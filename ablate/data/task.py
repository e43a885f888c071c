"""The ``task`` kind: what ablate needs of a data module beyond Lightning's ``LightningDataModule``.

A task's batches follow the contract of :mod:`ablate.data.collate`. Its training order is a pure
function of (seed, epoch) (:mod:`ablate.data.sampler`), and it can start training at any batch of any
epoch (:meth:`Task.resume_from`): that is what makes a resumed run the run it replaces. Its loaders
never draw from the global random state, so validation and decoding leave the training run's
random numbers alone.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset

from ablate.data.sampler import ResumableBatchSampler
from ablate.registry import declare_kind


class Task:
    """Mixed into a ``LightningDataModule``: resumable training order, DDP sharding, seeded loaders."""

    shards_itself = True  # its samplers deal batches to DDP ranks: Lightning must not add a DistributedSampler
    seed: int = 0
    train_position: tuple[int, int] = (0, 0)  # (epoch, batches done) the next training loader starts at

    @property
    def longest(self) -> int:
        """The longest sequence a training batch gives the model, in tokens (a decoder's BOS included): what its
        positional components must be able to encode. Tasks keep training sequences within ``data.max_len``."""
        return int(self.cfg.max_len)

    def resume_from(self, epoch: int, batches_done: int) -> None:
        """Make the next training loader start at batch ``batches_done`` of ``epoch`` (counted on this rank)."""
        self.train_position = (epoch, batches_done)

    def rank(self) -> tuple[int, int]:
        """(rank, world size) of this process under the trainer; (0, 1) outside one."""
        trainer = getattr(self, "trainer", None)
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def batch_loader(self, dataset: Dataset, sampler: ResumableBatchSampler, collate: Callable[[list[Any]], Any], *,
                     train: bool, num_workers: int = 0) -> DataLoader:
        """A loader of ``sampler``'s batches. A training loader starts at :attr:`train_position` (once)."""
        if train:
            sampler.start_at(*self.train_position)
            self.train_position = (0, 0)
        # The sampler as ``sampler`` (Lightning calls its set_epoch), yielding whole batches of indices; its own
        # generator, because creating an iterator draws a base seed, which must not come from the global RNG.
        return DataLoader(_Batches(dataset), sampler=sampler, batch_size=None, collate_fn=collate,
                          num_workers=num_workers, generator=torch.Generator().manual_seed(self.seed))


class _Batches(Dataset):
    """A dataset indexed by lists of indices: item ``[i, j, ...]`` is the list of those examples."""

    def __init__(self, examples: Any):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, indices: list[int]) -> list[Any]:
        many = getattr(self.examples, "__getitems__", None)
        return many(indices) if many is not None else [self.examples[i] for i in indices]


KIND = declare_kind("task", key="data.task", interface=Task, default="reverse",
                    description="a data module: synthetic tasks, parallel text, plain-text language modelling")
