"""Batching by token count (section 5.1): "Sentence pairs were batched together by approximate
sequence length. Each training batch contained a set of sentence pairs containing approximately
25000 source tokens and 25000 target tokens."

:class:`TokenBatchSampler` sorts examples by length (ties broken by the secondary lengths, e.g. the
source's then the target's, and then at random each epoch), packs
consecutive ones while ``n_examples * max_len_in_batch <= max_tokens``, shuffles the batch order
each epoch from (seed, epoch), and deals the batches out to ranks. It can start mid-epoch
(:class:`~ablate.data.sampler.ResumableBatchSampler`).

With ``bucket`` (``data.length_bucket``), a named option that is off by default: each example's length is
rounded up to a multiple of ``bucket`` (its bucket L), batches hold examples of one bucket only, at most
``max_tokens // L`` of them, and :class:`~ablate.data.collate.Seq2SeqCollator` pads every batch to exactly
(max_tokens // L, L) on both sides. So a run sees one shape per bucket (``max_len / bucket`` of them) and
``torch.compile`` and CUDA graphs stop re-tracing; the price is padding up to the bucket and the filler rows of
each bucket's last batch. Off, the paper's packing ("batched together by approximate sequence length") and its
batches stay exactly as they were.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ablate.data.sampler import ResumableBatchSampler


class TokenBatchSampler(ResumableBatchSampler):
    """Yields lists of example indices whose padded size stays within a token budget.

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
        bucket: pack by bucket (see the module's docstring); None packs greedily by the longest example.
        seed, rank, world_size, drop_last: as for :class:`ResumableBatchSampler`.

    Raises:
        ValueError: a non-positive budget, or a rank outside ``[0, world_size)``.
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        *,
        max_tokens: int,
        shuffle: bool = True,
        then_by: Sequence[Sequence[int] | np.ndarray] = (),
        bucket: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens} must be positive")
        if bucket is not None and bucket < 1:
            raise ValueError(f"bucket={bucket} must be positive")
        self.bucket = bucket
        self.lengths = np.asarray(lengths, dtype=np.int64)  # (N,)
        self.then_by = [np.asarray(key, dtype=np.int64) for key in then_by]  # each (N,)
        if any(key.shape != self.lengths.shape for key in self.then_by):
            raise ValueError(f"then_by: every key needs one length per example ({len(self.lengths)})")
        self.max_tokens, self.shuffle = max_tokens, shuffle

    def _order(self, rng: np.random.Generator | None) -> np.ndarray:
        """Example indices in packing order: ascending length, then ``then_by``, remaining ties at random
        (or by index without ``rng``)."""
        last = rng.random(len(self.lengths)) if rng is not None else np.arange(len(self.lengths))
        return np.lexsort((last, *reversed(self.then_by), self.lengths))  # lexsort: the last key sorts first

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        rng = self.rng(epoch) if self.shuffle else None
        order = self._order(rng)
        if self.bucket is None:
            out = pack(order, self.lengths, self.max_tokens)
        else:
            out = pack_buckets(order, self.lengths, self.max_tokens, self.bucket)
        if rng is not None:
            out = [out[i] for i in rng.permutation(len(out))]
        return out

    def batches(self, epoch: int | None = None) -> list[list[int]]:
        """Every batch of ``epoch`` (default: the current one), in order, before dealing to ranks."""
        return self.epoch_batches(self.epoch if epoch is None else epoch)


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


def bucket_length(length: int, bucket: int) -> int:
    """L: ``length`` rounded up to a multiple of ``bucket`` (never below one bucket)."""
    return max(1, -(-int(length) // bucket)) * bucket


def bucket_rows(length: int, bucket: int, max_tokens: int) -> int:
    """The rows of every batch of the bucket holding ``length``: max_tokens // L, at least one."""
    return max(1, max_tokens // bucket_length(length, bucket))


def pack_buckets(order: Iterable[int], lengths: np.ndarray, max_tokens: int, bucket: int) -> list[list[int]]:
    """Cut ``order`` (ascending length) into batches of one bucket each, ``bucket_rows`` examples at most.

    Each bucket's examples keep their order; only a bucket's last batch holds fewer (the collator fills it up).
    """
    batches: list[list[int]] = []
    current: list[int] = []
    current_bucket = None
    for i in order:
        b = bucket_length(lengths[i], bucket)
        if current and (b != current_bucket or len(current) >= bucket_rows(b, bucket, max_tokens)):
            batches.append(current)
            current = []
        current.append(int(i))
        current_bucket = b
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
