"""Token embeddings, their input path, and the pre-softmax projection (section 3.4)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.positional import Positional


class TokenEmbedding(nn.Embedding):
    """Token embedding, multiplied by sqrt(d_model) when ``scale`` (section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int, *, pad_id: int, scale: bool):
        super().__init__(vocab_size, d_model, padding_idx=None)
        nn.init.normal_(self.weight, std=d_model**-0.5)
        self.pad_id = pad_id
        self.multiplier = math.sqrt(d_model) if scale else 1.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids) * self.multiplier  # (B, T) -> (B, T, d_model)


class InputLayer(nn.Module):
    """Dropout(Embed(ids) * sqrt(d_model) + PE): the input to each stack (section 5.4)."""

    def __init__(self, *, embedding: TokenEmbedding, positional: Positional, dropout: float):
        super().__init__()
        self.embedding, self.positional = embedding, positional
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.dropout(self.positional(self.embedding(ids), offset))  # (B, T, d_model)


class TiedGenerator(nn.Module):
    """Pre-softmax projection sharing the embedding matrix (section 3.4): logits = x E^T."""

    def __init__(self, embedding: TokenEmbedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.embedding.weight)  # (B, T, d_model) -> (B, T, V)


def untied_generator(d_model: int, vocab_size: int) -> nn.Module:
    """A separate pre-softmax matrix (no bias, so the parameter count differs only by V x d_model)."""
    return nn.Linear(d_model, vocab_size, bias=False)
