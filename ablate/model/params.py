"""Parameter counts, total and per part, each shared tensor counted once."""

from __future__ import annotations

from torch import nn


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Count parameters per top-level part of ``model``, plus ``total``.

    A tensor shared between parts (tied embeddings) is counted in the first part
    that holds it, so the parts add up to the total.

    Returns:
        e.g. ``{"src_input": 21M, "encoder": 19M, "decoder": 25M, "total": 65M}``.
    """
    seen: set[int] = set()
    counts: dict[str, int] = {}
    for name, child in model.named_children():
        n = 0
        for p in child.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        counts[name] = n
    counts = {k: v for k, v in counts.items() if v or k in ("encoder", "decoder")}
    counts["total"] = sum(p.numel() for p in model.parameters())
    return counts
