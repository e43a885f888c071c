"""Sampling a continuation from a decoder-only language model.

Each step runs the model on the last ``context`` tokens (the block length it was trained on), so
every mask and positional variant sees what it saw in training: a sliding window, a prefix-LM
prefix, learned positions capped at ``max_len``. The prompt is short and the models are small;
recomputing the window each step keeps this exact for every variant.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


@torch.no_grad()
def sample(
    model: nn.Module,
    prompt: Sequence[int],
    *,
    max_new_tokens: int,
    context: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> list[int]:
    """Draw ``max_new_tokens`` tokens after ``prompt`` from ``model(ids) -> (B, T, V)`` logits.

    Args:
        model: a decoder-only model in eval mode, on the device to sample on.
        prompt: token ids to continue (at least one).
        max_new_tokens: how many tokens to draw.
        context: at most this many most recent tokens condition each step (the training block length).
        temperature: logits are divided by it; 0 takes the most likely token (greedy).
        top_k: sample among the k most likely tokens only (None: all).
        generator: the random source (seed it for repeatable samples), on the model's device.

    Returns:
        The drawn token ids (without the prompt).

    Raises:
        ValueError: an empty prompt, or a negative temperature, count, or a non-positive top_k/context.
    """
    if not prompt:
        raise ValueError("prompt: at least one token is needed to condition on")
    if temperature < 0 or max_new_tokens < 0 or context < 1 or (top_k is not None and top_k < 1):
        raise ValueError(f"temperature={temperature} >= 0, max_new_tokens={max_new_tokens} >= 0, "
                         f"context={context} >= 1 and top_k={top_k} >= 1 (or None) are required")
    device = next(model.parameters()).device
    ids = torch.as_tensor(list(prompt), dtype=torch.long, device=device)[None]  # (1, P)
    for _ in range(max_new_tokens):
        logits = model(ids[:, -context:])[0, -1].float()  # (V,): the next token's logits
        if temperature == 0:
            nxt = logits.argmax()[None]
        else:
            logits = logits / temperature
            if top_k is not None and top_k < logits.numel():
                kth = torch.topk(logits, top_k).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)  # (1,)
        ids = torch.cat((ids, nxt[None]), dim=1)  # (1, P + t + 1)
    return ids[0, len(prompt):].tolist()
