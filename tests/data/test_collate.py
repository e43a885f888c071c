"""An encoder-decoder batch is the pairs as torch's pad_sequence pads them: source, [BOS] + target, target + [EOS]."""

from __future__ import annotations

import random

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from ablate.data.collate import Seq2SeqCollator

PAD, BOS, EOS = 0, 1, 2


def padded_by_torch(pairs: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
    src = [torch.tensor(s, dtype=torch.long) for s, _ in pairs]
    tgt = [torch.tensor(t, dtype=torch.long) for _, t in pairs]
    bos, eos = torch.tensor([BOS]), torch.tensor([EOS])
    return {"src_ids": pad_sequence(src, batch_first=True, padding_value=PAD),
            "tgt_ids": pad_sequence([torch.cat((bos, t)) for t in tgt], batch_first=True, padding_value=PAD),
            "labels": pad_sequence([torch.cat((t, eos)) for t in tgt], batch_first=True, padding_value=PAD)}


@pytest.mark.parametrize("seed", range(5))
def test_a_batch_is_the_pairs_padded_by_pad_sequence(seed):
    rng = random.Random(seed)
    pairs = [([rng.randrange(3, 50) for _ in range(rng.randrange(1, 20))],
              [rng.randrange(3, 50) for _ in range(rng.randrange(0, 20))]) for _ in range(rng.randrange(1, 70))]
    batch, expected = Seq2SeqCollator(PAD, BOS, EOS)(pairs), padded_by_torch(pairs)
    assert batch.keys() == expected.keys()
    for key, x in expected.items():
        assert batch[key].dtype == x.dtype and torch.equal(batch[key], x), key


def test_a_batch_of_empty_targets_is_bos_and_eos_alone():
    batch = Seq2SeqCollator(PAD, BOS, EOS)([([5, 6], []), ([7], [])])
    assert batch["src_ids"].tolist() == [[5, 6], [7, PAD]]
    assert batch["tgt_ids"].tolist() == [[BOS], [BOS]] and batch["labels"].tolist() == [[EOS], [EOS]]
