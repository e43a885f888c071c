"""Where a search gets its next-token log-probabilities from (section 6.1 decodes left to right).

:class:`CachedSteps` runs the decoder on the newest token only, with the keys and values of
earlier positions and of the encoder output cached in the model's :class:`DecoderState`.
:class:`RecomputeSteps` runs the whole decoder over the prefix at every step: the reference,
and the only exact way for decoder masks that look ahead (``none``, ``prefix_lm``).
Both never propose padding or BOS, and both keep rows in step with ``select`` and ``reorder``.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn



class Steps(Protocol):
    """One decoding step for every row of a batch (sentences, or sentences x beams)."""

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (N, 1): each row's newest token -> log-probabilities (N, V) of the next one."""

    def select(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (N',) in that order: finished sentences dropped, beams reordered."""

    def reorder(self, index: torch.Tensor) -> None:
        """:meth:`select` for an index (N,) that keeps every row within its sentence's beams."""


def _log_probs(logits: torch.Tensor, banned: tuple[int, ...]) -> torch.Tensor:
    """Last-position logits (N, V) -> log-probabilities (N, V) in fp32, with ``banned`` ids at -inf."""
    logp = logits.float().log_softmax(dim=-1)
    logp[:, list(banned)] = float("-inf")
    return logp


class CachedSteps:
    """Steps with the model's key/value cache: each step costs one position, not the whole prefix."""

    def __init__(self, model: nn.Module, src_ids: torch.Tensor, banned: tuple[int, ...], repeat: int = 1):
        self.model, self.banned = model, banned
        self.state = model.start_decoding(src_ids, repeat)

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        return _log_probs(self.model.decode_step(tokens, self.state)[:, -1], self.banned)  # (N, V)

    def select(self, index: torch.Tensor) -> None:
        self.state.select(index)

    def reorder(self, index: torch.Tensor) -> None:
        self.state.reorder(index)


class RecomputeSteps:
    """Steps without a cache: the decoder runs over the whole prefix (BOS ... newest token) every step."""

    def __init__(self, model: nn.Module, src_ids: torch.Tensor, banned: tuple[int, ...], repeat: int = 1):
        self.model, self.banned = model, banned
        memory, src_mask = model.encode(src_ids)  # (B, S, d_model), (B, 1, 1, S)
        self.memory = memory.repeat_interleave(repeat, 0)  # (N, S, d_model), N = B * repeat
        self.src_mask = src_mask.repeat_interleave(repeat, 0)  # (N, 1, 1, S)
        self.prefix = src_ids.new_empty(self.memory.size(0), 0)  # (N, t)

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        self.prefix = torch.cat((self.prefix, tokens), dim=1)  # (N, t + 1)
        logits = self.model.decode(self.prefix, self.memory, self.src_mask)  # (N, t + 1, V)
        return _log_probs(logits[:, -1], self.banned)

    def select(self, index: torch.Tensor) -> None:
        self.memory, self.src_mask = self.memory.index_select(0, index), self.src_mask.index_select(0, index)
        self.reorder(index)

    def reorder(self, index: torch.Tensor) -> None:
        self.prefix = self.prefix.index_select(0, index)


def start_steps(model: nn.Module, src_ids: torch.Tensor, *, cache: bool | None, banned: tuple[int, ...],
                repeat: int = 1) -> Steps:
    """Steps for src_ids (B, S), each sentence decoded as ``repeat`` rows (its beams; N = B * repeat), sentence
    by sentence; the encoder runs once per sentence. Cached when ``cache`` (default: whenever ``model.incremental``).

    Raises:
        ValueError: ``cache=True`` for a model whose decoder mask looks ahead.
    """
    incremental = getattr(model, "incremental", False)
    if cache and not incremental:
        raise ValueError("cache=True: this model cannot decode incrementally (its decoder mask looks ahead)")
    cached = incremental if cache is None else cache
    return (CachedSteps if cached else RecomputeSteps)(model, src_ids, banned, repeat)


def max_lengths(src_ids: torch.Tensor, model: nn.Module, *, pad_id: int, a: float, b: int) -> torch.Tensor:
    """The longest output allowed per sentence, a * |x| + b tokens (section 6.1: a = 1, b = 50). Returns (B,).

    The decoder's positional component caps it when it has a ``max_len`` (learned positions): the
    decoder's inputs (BOS and all but the last output token) must have a position.
    """
    limits = (a * (src_ids != pad_id).sum(dim=1) + b).long().clamp(min=1)  # (B,)
    max_len = getattr(getattr(getattr(model, "tgt_input", None), "positional", None), "max_len", None)
    if max_len is not None:
        limits = limits.clamp(max=max_len)
    return limits
