"""The two architectures: the paper's encoder-decoder (section 3.1) and a decoder-only language model.

Each builds its attention masks once per forward, in one of two forms (:data:`MaskForm`), shared by every layer that
shares the mask: boolean masks for SDPA (the default, and always for cached decoding), or FlexAttention block masks
(``trainer.attention_kernel: flex``: :func:`ablate.train.kernels.choose_attention_kernel` sets ``model.mask_form``).

The encoder-decoder also decodes incrementally: :meth:`EncoderDecoder.start_decoding` encodes the
source once, then each :meth:`EncoderDecoder.decode_step` runs the decoder on the newest target
positions only, with the keys and values of earlier positions (and of the encoder output) cached.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ablate.components import flex
from ablate.components.masks import Mask
from ablate.components.sharing import PerLayer
from ablate.model.embedding import InputLayer
from ablate.model.layers import DecoderLayerCache

AllowedPairs = torch.Tensor | None  # (T_q, T_k) boolean, True = may attend; None = every pair
# key padding (B, 1, 1, T_k), allowed pairs, T_q -> the mask the attention receives: boolean or a block mask
MaskForm = Callable[[torch.Tensor, AllowedPairs, int], torch.Tensor | flex.BlockMask]


def key_padding(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, T) token ids -> (B, 1, 1, T) boolean, True where the key is a real token."""
    return (ids != pad_id)[:, None, None, :]


def combine(padding: torch.Tensor, attn: AllowedPairs) -> torch.Tensor:
    """Key-padding (B, 1, 1, T_k) & optional (T_q, T_k) mask -> (B, 1, T_q|1, T_k); True = may attend."""
    return padding if attn is None else padding & attn


def boolean_form(padding: torch.Tensor, attn: AllowedPairs, t_q: int) -> torch.Tensor:
    """:data:`MaskForm` for SDPA: :func:`combine`'s boolean mask (B, 1, T_q|1, T_k)."""
    return combine(padding, attn)


class LayerMasks:
    """A decoder's self-attention masks, one per layer (:meth:`Mask.layers`), each combined with the key padding."""

    def __init__(self, mask: Mask, n_layers: int):
        self.masks = mask.layers(n_layers)
        self.distinct = list({id(m): m for m in self.masks}.values())
        self.which = [next(i for i, d in enumerate(self.distinct) if d is m) for m in self.masks]  # layer -> distinct

    def __call__(self, padding: torch.Tensor, t_q: int, t_k: int,
                 form: MaskForm = boolean_form) -> torch.Tensor | flex.BlockMask | PerLayer:
        """padding (B, 1, 1, T_k) -> one mask (B, 1, T_q, T_k) for every layer, or a :class:`PerLayer` of them, in
        ``form``."""
        made = [form(padding, m(t_q, t_k, padding.device), t_q) for m in self.distinct]
        return made[0] if len(made) == 1 else PerLayer(made[i] for i in self.which)


class DecoderState:
    """What incremental decoding keeps between steps: each decoder layer's keys and values,
    the source key-padding mask (B, 1, 1, S), and the target key-padding mask so far (B, 1, 1, P)."""

    def __init__(self, layers: list[DecoderLayerCache], src_mask: torch.Tensor):
        self.layers, self.src_mask = layers, src_mask
        self.tgt_padding = src_mask.new_ones(src_mask.size(0), 1, 1, 0)  # (B, 1, 1, P = 0)

    @property
    def length(self) -> int:
        """P: the number of target positions decoded so far."""
        return self.tgt_padding.size(-1)

    def select(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (B',) of the batch, in that order: finished sentences dropped, beams reordered."""
        for layer in self.layers:
            layer.select(index)
        self.src_mask = self.src_mask.index_select(0, index)  # (B', 1, 1, S)
        self.tgt_padding = self.tgt_padding.index_select(0, index)  # (B', 1, 1, P)

    def reorder(self, index: torch.Tensor) -> None:
        """:meth:`select` for an ``index`` (B,) that maps every row to a row of the same source sentence
        (the beams of one sentence): the encoder-side keys and values, identical in those rows, stay."""
        for layer in self.layers:
            layer.self_attn.select(index)
        self.tgt_padding = self.tgt_padding.index_select(0, index)  # (B, 1, 1, P)


class EncoderDecoder(nn.Module):
    """Encoder-decoder Transformer: ``model(src_ids, tgt_ids)`` returns logits (B, T, V).

    ``incremental`` is True when the decoder mask never looks ahead (its own declaration), so that
    :meth:`start_decoding` / :meth:`decode_step` give the same logits as :meth:`decode`.
    """

    def __init__(
        self,
        *,
        src_input: InputLayer,
        tgt_input: InputLayer,
        encoder: nn.Module,
        decoder: nn.Module,
        generator: nn.Module,
        mask: Mask,
        pad_id: int,
    ):
        super().__init__()
        self.src_input, self.tgt_input = src_input, tgt_input
        self.encoder, self.decoder, self.generator = encoder, decoder, generator
        self.mask, self.pad_id = mask, pad_id
        self.layer_masks = LayerMasks(mask, len(decoder.layers))
        self.mask_form: MaskForm = boolean_form  # of the full passes; cached decoding's are boolean
        self.incremental = not mask.looks_ahead

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src_ids (B, S) -> memory (B, S, d_model) and its key-padding mask (B, 1, 1, S)."""
        src_mask, S = key_padding(src_ids, self.pad_id), src_ids.size(1)
        return self.encoder(self.src_input(src_ids), self.mask_form(src_mask, None, S)), src_mask

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """tgt_ids (B, T) shifted right, memory (B, S, d_model) -> logits (B, T, V)."""
        return self.generator(self.decode_hidden(tgt_ids, memory, src_mask))

    def decode_hidden(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """tgt_ids (B, T) shifted right, memory (B, S, d_model) -> the decoder's output (B, T, d_model)."""
        T = tgt_ids.size(1)
        self_mask = self.layer_masks(key_padding(tgt_ids, self.pad_id), T, T, self.mask_form)  # (B, 1, T, T), per layer
        cross_mask = self.mask_form(src_mask, None, T)  # (B, 1, 1|T, S)
        return self.decoder(self.tgt_input(tgt_ids), memory, self_mask, cross_mask)  # (B, T, d_model)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt_ids, *self.encode(src_ids))

    def hidden(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` before the generator: (B, S), (B, T) -> (B, T, d_model)."""
        return self.decode_hidden(tgt_ids, *self.encode(src_ids))

    def start_decoding(self, src_ids: torch.Tensor, repeat: int = 1) -> DecoderState:
        """Encode src_ids (B, S) once; cache each decoder layer's cross-attention keys and values.
        ``repeat``: decode each sentence as that many rows (its beams), B * repeat in all.

        Raises:
            ValueError: the decoder mask looks ahead (``Mask.looks_ahead``), so caching would change the logits.
        """
        if not self.incremental:
            raise ValueError(f"decoder mask {type(self.mask).__name__} lets positions attend to later ones: "
                             "cached decoding would differ from the full pass; run decode() over the prefix instead")
        memory, src_mask = self.encode(src_ids)  # (B, S, d_model), (B, 1, 1, S)
        if repeat > 1:  # the encoder runs once per sentence, not once per beam
            memory, src_mask = memory.repeat_interleave(repeat, 0), src_mask.repeat_interleave(repeat, 0)
        return DecoderState([layer.start(memory) for layer in self.decoder.layers], src_mask)

    def decode_step(self, tgt_ids: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """tgt_ids (B, T): the next T target tokens (BOS first) -> logits (B, T, V); state grows by T positions.

        The logits equal :meth:`decode` over all target tokens so far, at its last T positions.
        """
        P, T = state.length, tgt_ids.size(1)
        state.tgt_padding = torch.cat((state.tgt_padding, key_padding(tgt_ids, self.pad_id)), dim=-1)  # (B, 1, 1, P+T)
        self_mask = self.layer_masks(state.tgt_padding, T, P + T)  # (B, 1, T, P+T), or one per layer
        x = self.tgt_input(tgt_ids, P)  # (B, T, d_model), positions P .. P+T-1
        x = self.decoder(x, None, self_mask, state.src_mask, caches=state.layers)  # (B, T, d_model)
        return self.generator(x)


class DecoderOnly(nn.Module):
    """Decoder-only language model: ``model(ids)`` returns next-token logits (B, T, V)."""

    def __init__(self, *, tgt_input: InputLayer, decoder: nn.Module, generator: nn.Module, mask: Mask, pad_id: int):
        super().__init__()
        self.tgt_input, self.decoder, self.generator = tgt_input, decoder, generator
        self.mask, self.pad_id = mask, pad_id
        self.layer_masks = LayerMasks(mask, len(decoder.layers))
        self.mask_form: MaskForm = boolean_form

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.generator(self.hidden(ids))  # (B, T, V)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` before the generator: ids (B, T) -> (B, T, d_model)."""
        T = ids.size(1)
        self_mask = self.layer_masks(key_padding(ids, self.pad_id), T, T, self.mask_form)  # (B, 1, T, T), per layer
        return self.decoder(self.tgt_input(ids), self_mask)  # (B, T, d_model)
