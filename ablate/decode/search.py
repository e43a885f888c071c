"""Greedy decoding and beam search (section 6.1: beam 4, length penalty alpha = 0.6,
at most |x| + 50 output tokens, stopping early when possible), batched over sentences.

Beams are a batch dimension: row ``b * beam + k`` is beam k of sentence b. A sentence leaves
the batch as soon as it is done (greedy: it produced EOS; beam search: ``beam`` hypotheses
ended), so the batch shrinks as decoding goes. A hypothesis that reaches its maximum length
without EOS ends there. Outputs never contain BOS, EOS or padding.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from ablate.decode.steps import max_lengths, start_steps


@contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and inference mode for the block; the model's mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, GNMT; the paper's alpha = 0.6)."""
    return ((5 + length) / 6) ** alpha


def greedy(
    model: nn.Module,
    src_ids: torch.Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    max_len_a: float = 1,
    max_len_b: int = 50,
    cache: bool | None = None,
) -> list[list[int]]:
    """The most probable next token at every step.

    Args:
        model: an :class:`~ablate.model.transformer.EncoderDecoder` (or anything with its decoding methods).
        src_ids: (B, S) source ids, padded with ``pad_id`` at the end; on the model's device.
        max_len_a, max_len_b: at most ``max_len_a * |x| + max_len_b`` output tokens per sentence.
        cache: use the model's key/value cache; default: whenever its decoder mask allows it.

    Returns:
        B lists of token ids, without BOS and EOS.
    """
    with _evaluating(model):
        B = src_ids.size(0)
        limits = max_lengths(src_ids, model, pad_id=pad_id, a=max_len_a, b=max_len_b)  # (B,)
        steps = start_steps(model, src_ids, cache=cache, banned=(pad_id, bos_id))
        sent = torch.arange(B, device=src_ids.device)  # (n,): the sentences still decoding
        out = src_ids.new_empty(B, 0)  # (n, t)
        tokens = src_ids.new_full((B, 1), bos_id)  # (n, 1)
        results: list[list[int]] = [[] for _ in range(B)]
        for t in range(1, int(limits.max()) + 1):
            tokens = steps(tokens).argmax(dim=-1, keepdim=True)  # (n, 1)
            out = torch.cat((out, tokens), dim=1)  # (n, t)
            eos = tokens[:, 0] == eos_id  # (n,)
            ended = eos | (limits[sent] <= t)
            if not ended.any():
                continue
            for b, row, n in zip(sent[ended].tolist(), out[ended].tolist(), (t - eos[ended].long()).tolist()):
                results[b] = row[:n]  # without its EOS
            if ended.all():
                break
            keep = (~ended).nonzero()[:, 0]  # (n',): drop the finished sentences
            steps.select(keep)
            sent, out, tokens = sent[keep], out[keep], tokens[keep]
        return results


def beam_search(
    model: nn.Module,
    src_ids: torch.Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    beam: int = 4,
    alpha: float = 0.6,
    max_len_a: float = 1,
    max_len_b: int = 50,
    cache: bool | None = None,
) -> list[list[int]]:
    """Beam search with the GNMT length penalty; returns each sentence's best hypothesis.

    Each step extends every live beam by every token, keeps the ``2 * beam`` best candidates by
    total log-probability, ends those among the first ``beam`` that are EOS (scored log P(Y) / lp(Y),
    |Y| counting EOS) and continues with the ``beam`` best that are not. A sentence is done when
    ``beam`` hypotheses have ended, or at its maximum length, where its live beams end too.
    With ``beam=1`` this is :func:`greedy`.

    Args:
        model, src_ids, max_len_a, max_len_b, cache: as for :func:`greedy`.
        beam: hypotheses kept per sentence (the paper: 4).
        alpha: length penalty exponent (the paper: 0.6; 0 ranks by total log-probability).

    Returns:
        B lists of token ids, without BOS and EOS.

    Raises:
        ValueError: ``beam`` is not a positive integer.
    """
    if beam < 1:
        raise ValueError(f"beam={beam} is not allowed; expected a positive integer")
    with _evaluating(model):
        return _beam_search(model, src_ids, bos_id, eos_id, pad_id, beam, alpha, max_len_a, max_len_b, cache)


def _end(ended: list[list[tuple[float, list[int]]]], ids: list[int], which: torch.Tensor, scores: torch.Tensor,
         hist: torch.Tensor, origin: torch.Tensor, lp: float, cap: int | None) -> None:
    """Add the hypotheses ``which`` (n, C) marks to ``ended`` (at most ``cap`` per sentence): candidate (i, j)
    has total log-probability scores[i, j] and the tokens hist[i, origin[i, j]] (hist: (n, K, t))."""
    marked = which.nonzero().tolist()
    if not marked:
        return
    scores, origin, hist = scores.tolist(), origin.tolist(), hist.cpu()
    for i, j in marked:  # best first within a sentence: candidates are sorted by score
        if cap is None or len(ended[ids[i]]) < cap:
            ended[ids[i]].append((scores[i][j] / lp, hist[i, origin[i][j]].tolist()))


def _beam_search(model: nn.Module, src_ids: torch.Tensor, bos_id: int, eos_id: int, pad_id: int, K: int, alpha: float,
                 max_len_a: float, max_len_b: int, cache: bool | None) -> list[list[int]]:
    B, device = src_ids.size(0), src_ids.device
    limits = max_lengths(src_ids, model, pad_id=pad_id, a=max_len_a, b=max_len_b)  # (B,)
    steps = start_steps(model, src_ids, cache=cache, banned=(pad_id, bos_id), repeat=K)  # rows: sentence-major
    sent = torch.arange(B, device=device)  # (n,): the sentences still decoding
    scores = torch.full((B, K), float("-inf"), device=device)  # (n, K): log P of each live beam
    scores[:, 0] = 0.0  # one live beam at the start, so the first step does not pick the same token K times
    hist = src_ids.new_empty(B * K, 0)  # (n*K, t-1): each live beam's tokens
    tokens = src_ids.new_full((B * K, 1), bos_id)  # (n*K, 1)
    ended: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]  # (score / lp, tokens) per sentence
    for t in range(1, int(limits.max()) + 1):
        n, lp = sent.numel(), length_penalty(t, alpha)
        logp = steps(tokens)  # (n*K, V)
        V = logp.size(-1)
        top, idx = (scores.reshape(-1, 1) + logp).view(n, K * V).topk(2 * K, dim=1)  # (n, 2K), best first
        origin, token = idx // V, idx % V  # (n, 2K): the beam each candidate extends, and its token
        is_eos = token == eos_id
        ids = sent.tolist()  # one device-to-host copy a step, not one per sentence
        _end(ended, ids, is_eos[:, :K] & top[:, :K].isfinite(), top, hist.view(n, K, -1), origin, lp, K)
        live = is_eos.to(torch.int8).sort(dim=1, stable=True).indices[:, :K]  # (n, K): the K best non-EOS
        scores, origin, token = top.gather(1, live), origin.gather(1, live), token.gather(1, live)  # (n, K) each
        rows = (torch.arange(n, device=device)[:, None] * K + origin).view(-1)  # (n*K,): rows they extend
        hist = torch.cat((hist[rows], token.view(-1, 1)), dim=1)  # (n*K, t)
        at_limit = limits[sent] <= t  # (n,): live beams end here too
        beam_ids = torch.arange(K, device=device).expand(n, K)
        _end(ended, ids, at_limit[:, None] & scores.isfinite(), scores, hist.view(n, K, -1), beam_ids, lp, None)
        done = at_limit | torch.tensor([len(ended[b]) >= K for b in ids], device=device)
        if done.all():
            break
        if done.any():  # drop the finished sentences
            keep = (~done).nonzero()[:, 0]  # (n',)
            beams = (keep[:, None] * K + torch.arange(K, device=device)).view(-1)  # (n'*K,)
            steps.select(rows[beams])
            sent, scores, hist = sent[keep], scores[keep], hist[beams]
        else:
            steps.reorder(rows)  # beams stay within their sentence: the source side need not move
        tokens = hist[:, -1:]  # (n'*K, 1): each live beam's newest token
    return [max(hyps, key=lambda h: h[0])[1] for hyps in ended]
