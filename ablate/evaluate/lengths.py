"""Length extrapolation: a language model scored on sequences 1x, 2x, 4x ... as long as it trained on.

The validation token stream is cut into non-overlapping blocks of T = factor x ``data.max_len`` tokens
(plus one for the last label), and every factor scores the very same tokens: the stream is cut to a
multiple of the longest block. ``val/loss@<f>x`` is the mean negative log-likelihood per scored token
(the mask's scored positions, as in training), in nats. A model whose positional component encodes
fewer positions than a block (``max_len``, e.g. learned positions) cannot be scored there: the
result says so instead of a number (Press et al. 2022 compare positional variants this way).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ablate.config.schema import Arch
from ablate.errors import COMMAND_LINE, ConfigError
from ablate.evaluate.load import load_run_model, run_task
from ablate.model.inspect import too_long
from ablate.runs.files import write_result
from ablate.runs.metrics import perplexity
from ablate.runs.wandb import record_scores

FACTORS = (1, 2, 4)


def key(factor: int, metric: str = "loss") -> str:
    """``val/loss@2x``: the result.json key of a score at ``factor`` times the training length."""
    return f"val/{metric}@{factor}x"


@torch.inference_mode()
def score(model: nn.Module, stream: torch.Tensor, length: int, *, batch_tokens: int = 16384) -> float:
    """Mean NLL per scored token of ``stream`` (N,) cut into blocks of ``length`` inputs (and their next tokens)."""
    device = next(model.parameters()).device
    blocks = stream[: (len(stream) - 1) // length * length + 1]
    ids = blocks[:-1].view(-1, length)  # (n, T)
    labels = blocks[1:].view(-1, length)  # (n, T)
    scored = model.mask.scored(length, device)  # (T,)
    total, count, rows = 0.0, 0, max(1, batch_tokens // length)
    for start in range(0, ids.size(0), rows):
        x, y = ids[start : start + rows].to(device), labels[start : start + rows].to(device)
        logits = model(x).float()  # (B, T, V)
        nll = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")[:, scored]  # (B, scored T)
        total, count = total + float(nll.sum()), count + nll.numel()
    return total / count


def evaluate_lengths(run_dir: str | Path, *, factors: Sequence[int] = FACTORS, checkpoint: str | None = None,
                     average_last: int = 0, device: str | None = None) -> dict[str, Any]:
    """Score a language-model run at several multiples of its training length; record the scores.

    Args:
        run_dir: a run directory of a decoder-only model on a task with a token stream (``text_lm``).
        factors: multiples of ``data.max_len`` to score at.
        checkpoint, average_last, device: which weights, and where (as for ``ablate evaluate``).

    Returns:
        What was merged into result.json: ``val/loss@<f>x`` and ``val/ppl@<f>x`` for each factor the model
        can encode, and ``lengths`` (the block lengths, the tokens scored, why a factor could not be scored).

    Raises:
        ConfigError: not a decoder-only run, a task without a token stream, or a validation split shorter
            than the longest block.
    """
    run_dir = Path(run_dir)
    cfg, model, paths = load_run_model(run_dir, checkpoint=checkpoint, average_last=average_last, device=device)
    if cfg.model.arch != Arch.decoder_only:
        raise ConfigError("model.arch", cfg.model.arch.value, "decoder_only: lengths are scored on language models")
    data = run_task(cfg)
    if not hasattr(data, "stream"):
        raise ConfigError("data.task", cfg.data.task, "a language-model task with a token stream (text_lm)")
    if not factors or any(f < 1 for f in factors):
        raise ConfigError("--lengths", ",".join(map(str, factors)), "positive whole multiples, e.g. 1,2,4")
    T = cfg.data.max_len
    stream = data.stream("val")
    longest = max(factors) * T
    usable = (len(stream) - 1) // longest * longest  # the same tokens at every length
    if usable == 0:
        raise ConfigError("--lengths", max(factors), f"a multiple whose block ({longest} tokens) fits in the "
                          f"validation split ({len(stream)} tokens)", COMMAND_LINE)
    stream = stream[: usable + 1]
    entries: dict[str, Any] = {}
    unsupported: dict[str, str] = {}
    start = time.perf_counter()
    for f in factors:
        reason = too_long(model, f * T)
        if reason:
            unsupported[f"{f}x"] = reason
            continue
        loss = score(model, stream, f * T)
        entries[key(f)], entries[key(f, "ppl")] = loss, perplexity(loss)
    entries["lengths"] = {"factors": list(factors), "block": T, "tokens": usable, "unsupported": unsupported,
                          "checkpoints": [p.name for p in paths], "seconds": time.perf_counter() - start}
    write_result(run_dir, entries, merge=True)
    record_scores(cfg, run_dir, {k: v for k, v in entries.items() if k != "lengths"})
    return entries
