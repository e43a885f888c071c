"""Batch samplers whose order is a function of (seed, epoch), and that can start anywhere in an epoch.

Exact resume (:mod:`ablate.train.resume`) needs the data a resumed run sees to be the data the
uninterrupted run would have seen next. So no training order here draws from a global random
state: epoch ``e``'s batches are a pure function of (seed, e), and :meth:`ResumableBatchSampler.start_at`
makes the next iteration begin at batch ``k`` of epoch ``e``. Lightning selects the epoch with
``set_epoch`` before each new epoch.

Use a sampler as ``DataLoader(dataset, sampler=s, batch_size=None, collate_fn=...)`` with a dataset
that takes a list of indices (``__getitems__``), or as ``batch_sampler=s``.
"""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np
from torch.utils.data import Sampler


class ResumableBatchSampler(Sampler[list[int]]):
    """Base: batches of example indices per epoch; subclasses define :meth:`epoch_batches`.

    Args:
        seed: the base seed of every shuffle.
        rank, world_size: under DDP, this rank gets batches ``rank, rank + world_size, ...`` of the epoch.
        drop_last: drop the batches that do not divide evenly among ranks instead of repeating the first ones.
    """

    def __init__(self, *, seed: int = 0, rank: int = 0, world_size: int = 1, drop_last: bool = False):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must lie in [0, world_size={world_size})")
        self.seed, self.rank, self.world_size, self.drop_last = seed, rank, world_size, drop_last
        self.epoch, self._skip = 0, 0
        self._cached: tuple[int, list[list[int]]] | None = None

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """Every batch of ``epoch``, in order, before they are dealt to ranks."""
        raise NotImplementedError

    def rng(self, epoch: int) -> np.random.Generator:
        """The random source of ``epoch``'s order: seeded by (seed, epoch), nothing else."""
        return np.random.default_rng([self.seed, epoch])

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch the next iteration uses (from its first batch)."""
        if epoch != self.epoch:
            self.epoch, self._skip = epoch, 0

    def start_at(self, epoch: int, batches_done: int) -> None:
        """Make the next iteration yield ``epoch``'s batches from number ``batches_done`` on (the next
        epoch's first, when all of them are done)."""
        if batches_done >= len(self._rank_batches(epoch)):
            epoch, batches_done = epoch + 1, 0
        self.epoch, self._skip = epoch, batches_done

    def _rank_batches(self, epoch: int) -> list[list[int]]:
        if self._cached is None or self._cached[0] != epoch:
            every = self.epoch_batches(epoch)
            n = len(every) // self.world_size if self.drop_last else math.ceil(len(every) / self.world_size)
            total = n * self.world_size
            dealt = [every[i % len(every)] for i in range(total)] if every else []
            self._cached = (epoch, dealt[self.rank : total : self.world_size])
        return self._cached[1]

    def __iter__(self) -> Iterator[list[int]]:
        batches, skip = self._rank_batches(self.epoch), self._skip
        self._skip = 0
        return iter(batches[skip:])

    def __len__(self) -> int:
        """The number of batches of a whole epoch on this rank (a resumed epoch yields fewer)."""
        return len(self._rank_batches(self.epoch))


class ShuffledBatches(ResumableBatchSampler):
    """``n`` examples in batches of ``batch_size``: a fresh permutation each training epoch, index order otherwise."""

    def __init__(self, n: int, batch_size: int, *, shuffle: bool = True, **kwargs):
        super().__init__(**kwargs)
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be positive")
        self.n, self.batch_size, self.shuffle = n, batch_size, shuffle

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        order = self.rng(epoch).permutation(self.n) if self.shuffle else np.arange(self.n)
        return [order[i : i + self.batch_size].tolist() for i in range(0, self.n, self.batch_size)]
