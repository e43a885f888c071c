"""The one assembler: every architectural choice in a config is made here, once, at build time.

Each part comes from the registry (:mod:`ablate.registry`): the embedding, the positional component
of each stack, attention, feed-forward, residual connection (``norm_position``) and its norm, the
decoder mask, layer sharing. A factory receives the dimensions it names and, for a parameter named
like a kind, a component of that kind built from the config (a residual's ``norm``).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import nn

import ablate.components  # noqa: F401  (registers the built-in components)
from ablate import registry
from ablate.config.dims import context, layer_counts
from ablate.config.schema import Arch
from ablate.model.embedding import InputLayer
from ablate.components.positional import Positional
from ablate.model.layers import DecoderLayer, EncoderLayer
from ablate.model.transformer import DecoderOnly, EncoderDecoder


class Parts:
    """Builds registered parts from one run config."""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        self.context = {**context(cfg), "decoder_only": cfg.model.arch == Arch.decoder_only}

    def make(self, kind: str, **extra: Any) -> Any:
        """The configured variant of ``kind``, with ``extra`` context (stack, cross, positional)."""
        k = registry.kind(kind)
        args = OmegaConf.to_container(OmegaConf.select(self.cfg, k.args_key), resolve=True)
        return registry.create(kind, OmegaConf.select(self.cfg, k.key), {**self.context, **extra}, args,
                               build=lambda sub: self.make(sub, **extra))

    def stack(self, stack: str, n: int, positional: Positional, decoder: bool) -> nn.Module:
        """N layers of one stack, shared or not, run by the sharing variant's stack, and its final norm when the
        residual placement wants one."""
        layer = self.decoder_layer if decoder else self.encoder_layer
        sharing = self.make("sharing", stack=stack)
        layers = sharing.layers(n, lambda i=0: layer(stack, positional, i))
        final = self.make("norm", stack=stack) if layers[0].res_ffn.final_norm else nn.Identity()
        return sharing.stack(layers, final)

    def encoder_layer(self, stack: str, positional: Positional, i: int) -> EncoderLayer:
        at = {"stack": stack, "layer": i}
        return EncoderLayer(
            self_attn=self.make("attention", **at, positional=positional.for_layer(i), cross=False),
            ffn=self.make("ffn", **at),
            res_attn=self.make("norm_position", **at),
            res_ffn=self.make("norm_position", **at),
        )

    def decoder_layer(self, stack: str, positional: Positional, i: int) -> DecoderLayer:
        at = {"stack": stack, "layer": i}
        return DecoderLayer(
            self_attn=self.make("attention", **at, positional=positional.for_layer(i), cross=False),
            cross_attn=self.make("attention", **at, cross=True),
            ffn=self.make("ffn", **at),
            res_attn=self.make("norm_position", **at),
            res_cross=self.make("norm_position", **at),
            res_ffn=self.make("norm_position", **at),
        )


def build_model(cfg: DictConfig) -> nn.Module:
    """Build the model a run config describes.

    Args:
        cfg: a validated run config (see :func:`ablate.load_config`).

    Returns:
        :class:`EncoderDecoder` (``model(src_ids, tgt_ids)``) or :class:`DecoderOnly`
        (``model(ids)``); both return logits (batch, length, vocab).
    """
    m, d = cfg.model, cfg.data
    parts = Parts(cfg)
    n_enc, n_dec = layer_counts(m)
    emb = parts.make("embedding")
    mask = parts.make("mask")
    tgt_pos = parts.make("positional", stack="decoder")
    tgt_input = InputLayer(embedding=emb.target, positional=tgt_pos, dropout=m.dropout)
    if m.arch == Arch.decoder_only:
        model: nn.Module = DecoderOnly(tgt_input=tgt_input,
                                       decoder=parts.stack("decoder", n_dec, tgt_pos, decoder=False),
                                       generator=emb.generator, mask=mask, pad_id=d.pad_id)
    else:
        src_pos = parts.make("positional", stack="encoder")
        model = EncoderDecoder(
            src_input=InputLayer(embedding=emb.source, positional=src_pos, dropout=m.dropout),
            tgt_input=tgt_input,
            encoder=parts.stack("encoder", n_enc, src_pos, decoder=False),
            decoder=parts.stack("decoder", n_dec, tgt_pos, decoder=True),
            generator=emb.generator,
            mask=mask,
            pad_id=d.pad_id,
        )
    initialize(model)
    return model


def initialize(model: nn.Module) -> None:
    """Xavier-uniform weights and zero biases for every linear layer (as in tensor2tensor / fairseq), then
    each residual connection's own re-initialisation of its sub-layer (DeepNorm), once per distinct layer."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    for module in model.modules():  # modules() yields a shared layer once
        for residual, sublayer in getattr(module, "residuals", lambda: [])():
            residual.init_sublayer(sublayer)
