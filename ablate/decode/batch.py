"""Translating a whole split: length-sorted batches of about ``batch_tokens`` tokens, results in input order."""

from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from ablate.decode.search import beam_search, greedy


def length_batches(lengths: Sequence[int], *, rows_per_item: int, batch_tokens: int) -> Iterator[list[int]]:
    """Indices of ``lengths`` in ascending length order, cut into batches of at most ``batch_tokens``
    (rows x longest length; each item takes ``rows_per_item`` rows, e.g. its beams); never empty."""
    batch: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if batch and (len(batch) + 1) * rows_per_item * lengths[i] > batch_tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def translate(
    model: nn.Module,
    sources: Sequence[Sequence[int]],
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    beam: int = 4,
    alpha: float = 0.6,
    max_len_a: float = 1,
    max_len_b: int = 50,
    batch_tokens: int = 8192,
    cache: bool | None = None,
) -> list[list[int]]:
    """Decode every source sentence: :func:`greedy` when ``beam == 1``, else :func:`beam_search`.

    Args:
        model: the model, on the device to decode on.
        sources: token ids of each source sentence (no BOS or EOS).
        beam, alpha, max_len_a, max_len_b, cache: as for :func:`beam_search`.
        batch_tokens: source tokens per batch, counting every beam (rows x longest source).

    Returns:
        The hypothesis of each source (token ids without BOS and EOS), in the order of ``sources``.
        An empty source gets an empty hypothesis: there is nothing to attend to.
    """
    device = next(model.parameters()).device
    settings = dict(bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, max_len_a=max_len_a, max_len_b=max_len_b, cache=cache)
    hypotheses: list[list[int]] = [[] for _ in sources]
    nonempty = [i for i, s in enumerate(sources) if len(s)]
    lengths = [len(sources[i]) for i in nonempty]
    for batch in length_batches(lengths, rows_per_item=beam, batch_tokens=batch_tokens):
        ids = [nonempty[j] for j in batch]
        src = pad_sequence([torch.as_tensor(sources[i], dtype=torch.long) for i in ids], True, pad_id).to(device)
        if beam == 1:
            out = greedy(model, src, **settings)
        else:
            out = beam_search(model, src, beam=beam, alpha=alpha, **settings)
        for i, hypothesis in zip(ids, out):
            hypotheses[i] = hypothesis
    return hypotheses
