"""The registry's model variants, for the tests generated from it (``tests/components/test_every_variant.py``,
``tests/train/test_fusable.py``), and a small batch to run a model on.

A variant registered tomorrow, or a kind declared tomorrow, is in these lists without a new line of test code: the
kinds come from ``registry.kinds()``, the variants from ``registry.names(kind)``. Kinds outside the ``model`` section
(``train.schedule``, ``data.task``) build no part of the model.
"""

from __future__ import annotations

import torch

from ablate import registry

MODEL_KINDS = [k.name for k in registry.kinds().values() if k.section == "model"]
VARIANTS = [(kind, name) for kind in MODEL_KINDS for name in registry.names(kind)]
VARIANT_IDS = [f"{kind}={name}" for kind, name in VARIANTS]
ARCHS = ("encoder_decoder", "decoder_only")


def batch(vocab: int, pad: int, length: int = 5, seed: int = 0) -> dict[str, torch.Tensor]:
    """Sources (3, 7) and targets (3, ``length``) of random tokens, with padding in one row of each."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (3, 7), generator=g)
    tgt = torch.randint(3, vocab, (3, length), generator=g)
    src[0, 5:] = pad  # padding matters
    tgt[1, 3:] = pad
    return {"src": src, "tgt": tgt}


def inputs(arch: str, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The model's keyword arguments for a :func:`batch`: an encoder-decoder reads both, a decoder-only model the
    targets."""
    return {"src_ids": b["src"], "tgt_ids": b["tgt"]} if arch == "encoder_decoder" else {"ids": b["tgt"]}


def run(model: torch.nn.Module, arch: str, b: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's logits (3, T, V) for a :func:`batch`."""
    return model(**inputs(arch, b))
