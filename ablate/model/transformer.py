"""The two architectures: the paper's encoder-decoder (section 3.1) and a decoder-only language model."""

from __future__ import annotations

import torch
from torch import nn

from ablate.model.embedding import InputLayer
from ablate.model.layers import Stack

Mask = torch.Tensor | None


def key_padding(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, T) token ids -> (B, 1, 1, T) boolean, True where the key is a real token."""
    return (ids != pad_id)[:, None, None, :]


def combine(padding: torch.Tensor, attn: Mask) -> torch.Tensor:
    """Key-padding (B, 1, 1, T_k) & optional (T_q, T_k) mask -> (B, 1, T_q|1, T_k); True = may attend."""
    return padding if attn is None else padding & attn


class EncoderDecoder(nn.Module):
    """Encoder-decoder Transformer: ``model(src_ids, tgt_ids)`` returns logits (B, T, V)."""

    def __init__(
        self,
        *,
        src_input: InputLayer,
        tgt_input: InputLayer,
        encoder: Stack,
        decoder: Stack,
        generator: nn.Module,
        mask: object,
        pad_id: int,
    ):
        super().__init__()
        self.src_input, self.tgt_input = src_input, tgt_input
        self.encoder, self.decoder, self.generator = encoder, decoder, generator
        self.mask, self.pad_id = mask, pad_id

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src_ids (B, S) -> memory (B, S, d_model) and its key-padding mask (B, 1, 1, S)."""
        src_mask = key_padding(src_ids, self.pad_id)
        return self.encoder(self.src_input(src_ids), src_mask), src_mask

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """tgt_ids (B, T) shifted right, memory (B, S, d_model) -> logits (B, T, V)."""
        T = tgt_ids.size(1)
        self_mask = combine(key_padding(tgt_ids, self.pad_id), self.mask(T, T, tgt_ids.device))
        x = self.decoder(self.tgt_input(tgt_ids), memory, self_mask, src_mask)  # (B, T, d_model)
        return self.generator(x)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt_ids, *self.encode(src_ids))


class DecoderOnly(nn.Module):
    """Decoder-only language model: ``model(ids)`` returns next-token logits (B, T, V)."""

    def __init__(self, *, tgt_input: InputLayer, decoder: Stack, generator: nn.Module, mask: object, pad_id: int):
        super().__init__()
        self.tgt_input, self.decoder, self.generator = tgt_input, decoder, generator
        self.mask, self.pad_id = mask, pad_id

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.size(1)
        self_mask = combine(key_padding(ids, self.pad_id), self.mask(T, T, ids.device))
        return self.generator(self.decoder(self.tgt_input(ids), self_mask))  # (B, T, V)
