"""Turning examples into padded batches. Batches are dicts whose keys are the model's arguments plus ``labels``.

- encoder-decoder: ``src_ids`` (B, S), ``tgt_ids`` (B, T) = [BOS] + y, ``labels`` (B, T) = y + [EOS]
- decoder-only: ``ids`` (B, T), ``labels`` (B, T) = ids shifted left by one
Padding is ``pad_id`` everywhere; the loss ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch.nn.utils.rnn import pad_sequence


@dataclass(frozen=True)
class Seq2SeqCollator:
    """Pads (source ids, target ids) pairs into an encoder-decoder batch."""

    pad_id: int
    bos_id: int
    eos_id: int

    def __call__(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, torch.Tensor]:
        src = [torch.as_tensor(s, dtype=torch.long) for s, _ in pairs]
        tgt = [torch.as_tensor(t, dtype=torch.long) for _, t in pairs]
        bos, eos = torch.tensor([self.bos_id]), torch.tensor([self.eos_id])
        return {
            "src_ids": pad_sequence(src, batch_first=True, padding_value=self.pad_id),  # (B, S)
            "tgt_ids": pad_sequence([torch.cat((bos, t)) for t in tgt], True, self.pad_id),  # (B, T)
            "labels": pad_sequence([torch.cat((t, eos)) for t in tgt], True, self.pad_id),  # (B, T)
        }


def target_tokens(batch: dict[str, torch.Tensor], pad_id: int) -> int:
    """Number of real (non-pad) target tokens in a batch: the unit of tokens/s."""
    return int((batch["labels"] != pad_id).sum())


def stack_lm(examples: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Equal-length language-model blocks -> ``{"ids": (B, T), "labels": (B, T)}``."""
    return {key: torch.stack([e[key] for e in examples]) for key in ("ids", "labels")}
