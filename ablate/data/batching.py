"""Batching by token count (section 5.1): "Sentence pairs were batched together by approximate
sequence length. Each training batch contained a set of sentence pairs containing approximately
25000 source tokens and 25000 target tokens."

:class:`TokenBatchSampler` sorts examples by length (ties broken by the secondary lengths, e.g. the
source's then the target's, and then at random each epoch), packs
consecutive ones while ``n_examples * max_len_in_batch <= max_tokens``, shuffles the batch order
each epoch from (seed, epoch), and deals the batches out to ranks.
"""

from __future__ import annotations

import itertools
import math
from typing import Iterable, Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded size stays within a token budget.

    Use it as ``DataLoader(dataset, sampler=s, batch_size=None, collate_fn=...)`` with a dataset
    that takes a list of indices (Lightning then calls :meth:`set_epoch` on it), or as
    ``batch_sampler=s``.

    Args:
        lengths: per-example length, e.g. ``max(S, T)`` with T counting BOS/EOS.
        then_by: secondary lengths that break ties in ``lengths``, first one first (e.g. ``(S, T)``):
            a batch then holds sources and targets of like lengths, so both sides pad less. The
            price (as in fairseq, which sorts the same way): only exact ties are shuffled, so a
            batch holds much the same sentences every epoch; the batch order is what varies.
        max_tokens: budget per batch: ``len(batch) * max(lengths[batch]) <= max_tokens``, except
            that a batch always holds at least one example.
        shuffle: training mode: random tie-breaking and batch order from (seed, epoch). Otherwise
            the order is fixed: ascending length, ties by index.
        seed: base seed for the shuffles.
        rank: this process's rank; it gets batches ``rank, rank + world_size, ...``.
        world_size: number of processes; every rank gets the same number of batches.
        drop_last: drop the batches that do not divide evenly among ranks instead of repeating
            the first ones.

    Raises:
        ValueError: a non-positive budget, or a rank outside ``[0, world_size)``.
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        *,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
        then_by: Sequence[Sequence[int] | np.ndarray] = (),
    ):
        if max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens} must be positive")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must lie in [0, world_size={world_size})")
        self.lengths = np.asarray(lengths, dtype=np.int64)  # (N,)
        self.then_by = [np.asarray(key, dtype=np.int64) for key in then_by]  # each (N,)
        if any(key.shape != self.lengths.shape for key in self.then_by):
            raise ValueError(f"then_by: every key needs one length per example ({len(self.lengths)})")
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.rank, self.world_size, self.drop_last = rank, world_size, drop_last
        self.epoch = 0
        self._cached: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose shuffle the next iteration uses."""
        self.epoch = epoch

    def _order(self, rng: np.random.Generator | None) -> np.ndarray:
        """Example indices in packing order: ascending length, then ``then_by``, remaining ties at random
        (or by index without ``rng``)."""
        last = rng.random(len(self.lengths)) if rng is not None else np.arange(len(self.lengths))
        return np.lexsort((last, *reversed(self.then_by), self.lengths))  # lexsort: the last key sorts first

    def batches(self, epoch: int | None = None) -> list[list[int]]:
        """Every batch of ``epoch`` (default: the current one), in order, before dealing to ranks."""
        rng = np.random.default_rng([self.seed, self.epoch if epoch is None else epoch]) if self.shuffle else None
        out = pack(self._order(rng), self.lengths, self.max_tokens)
        if rng is not None:
            out = [out[i] for i in rng.permutation(len(out))]
        return out

    def _rank_batches(self) -> list[list[int]]:
        if self._cached is None or self._cached[0] != self.epoch:
            every = self.batches()
            n = len(every) // self.world_size if self.drop_last else math.ceil(len(every) / self.world_size)
            total = n * self.world_size
            dealt = list(itertools.islice(itertools.cycle(every), total)) if every else []
            self._cached = (self.epoch, dealt[self.rank : total : self.world_size])
        return self._cached[1]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._rank_batches())

    def __len__(self) -> int:
        return len(self._rank_batches())


def pack(order: Iterable[int], lengths: np.ndarray, max_tokens: int) -> list[list[int]]:
    """Greedily cut ``order`` into batches with ``len(batch) * max(lengths[batch]) <= max_tokens``.

    A single example longer than ``max_tokens`` still forms a batch of its own.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        length = int(lengths[i])
        if current and (len(current) + 1) * max(longest, length) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(int(i))
        longest = max(longest, length)
    if current:
        batches.append(current)
    return batches


def padding_fraction(batches: Iterable[Sequence[int]], lengths: Sequence[int] | np.ndarray) -> float:
    """Share of the padded ``(B, max length)`` slots that hold padding, over all ``batches``."""
    lengths = np.asarray(lengths)
    real = slots = 0
    for batch in batches:
        ls = lengths[np.asarray(batch)]
        real += int(ls.sum())
        slots += len(ls) * int(ls.max())
    return 1.0 - real / slots if slots else 0.0
