"""The input to each stack: Dropout(Embed(ids) * sqrt(d_model) + PE) (sections 3.4, 3.5 and 5.4)."""

from __future__ import annotations

import torch
from torch import nn

from ablate.components.positional import Positional


class InputLayer(nn.Module):
    """A stack's input: its token embedding (from the embedding component), position information, dropout."""

    def __init__(self, *, embedding: nn.Module, positional: Positional, dropout: float):
        super().__init__()
        self.embedding, self.positional = embedding, positional
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.dropout(self.positional(self.embedding(ids), offset))  # (B, T) -> (B, T, d_model)
