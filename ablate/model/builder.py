"""The one assembler: every architectural choice in a config is made here, once, at build time."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import nn

from ablate import registry
from ablate.components.attention import CrossAttention, SelfAttention
from ablate.config.schema import Arch
from ablate.model.embedding import InputLayer, TiedGenerator, TokenEmbedding, untied_generator
from ablate.model.layers import DecoderLayer, EncoderLayer, Stack
from ablate.model.transformer import DecoderOnly, EncoderDecoder


def dims(model_cfg: DictConfig) -> dict[str, Any]:
    """The resolved dimensions of a model config: d_k and d_v default to d_model / h (section 3.2.2)."""
    m = model_cfg
    return {
        "d_model": m.d_model,
        "n_heads": m.n_heads,
        "d_k": m.d_k if m.d_k is not None else m.d_model // m.n_heads,
        "d_v": m.d_v if m.d_v is not None else m.d_model // m.n_heads,
        "d_ff": m.d_ff,
        "dropout": m.dropout,
    }


class _Parts:
    """Builds registered parts from one model config."""

    def __init__(self, cfg: DictConfig):
        self.m = cfg.model
        self.ctx = dims(self.m)

    def make(self, key: str, **extra: Any) -> Any:
        args = OmegaConf.to_container(self.m[f"{key}_args"], resolve=True)
        return registry.create(key, self.m[key], {**self.ctx, **extra}, args)

    def residual(self) -> nn.Module:
        return self.make("norm_position", norm=self.make("norm"))

    def final_norm(self) -> nn.Module:
        placement = registry.get("norm_position", self.m.norm_position).factory
        return self.make("norm") if getattr(placement, "final_norm", False) else nn.Identity()

    def attention_dims(self) -> dict[str, Any]:
        d = self.ctx
        return dict(d_model=d["d_model"], n_heads=d["n_heads"], d_k=d["d_k"], d_v=d["d_v"], dropout=self.m.attention_dropout)

    def encoder_layer(self, positional: nn.Module) -> EncoderLayer:
        return EncoderLayer(
            self_attn=SelfAttention(positional=positional, **self.attention_dims()),
            ffn=self.make("ffn"),
            res_attn=self.residual(),
            res_ffn=self.residual(),
        )

    def decoder_layer(self, positional: nn.Module) -> DecoderLayer:
        return DecoderLayer(
            self_attn=SelfAttention(positional=positional, **self.attention_dims()),
            cross_attn=CrossAttention(**self.attention_dims()),
            ffn=self.make("ffn"),
            res_attn=self.residual(),
            res_cross=self.residual(),
            res_ffn=self.residual(),
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
    parts = _Parts(cfg)
    n_enc = m.n_encoder_layers or m.n_layers
    n_dec = m.n_decoder_layers or m.n_layers

    def embedding() -> TokenEmbedding:
        return TokenEmbedding(d.vocab_size, m.d_model, pad_id=d.pad_id, scale=m.scale_embeddings)

    def input_layer(emb: TokenEmbedding, positional: nn.Module) -> InputLayer:
        return InputLayer(embedding=emb, positional=positional, dropout=m.dropout)

    tgt_emb = embedding()
    tgt_pos = parts.make("positional")
    generator = TiedGenerator(tgt_emb) if m.tie_embeddings else untied_generator(m.d_model, d.vocab_size)
    mask = parts.make("mask")
    if m.arch == Arch.decoder_only:
        model = DecoderOnly(
            tgt_input=input_layer(tgt_emb, tgt_pos),
            decoder=Stack([parts.encoder_layer(tgt_pos) for _ in range(n_dec)], parts.final_norm()),
            generator=generator,
            mask=mask,
            pad_id=d.pad_id,
        )
    else:
        src_emb = tgt_emb if m.tie_embeddings else embedding()
        src_pos = parts.make("positional")
        model = EncoderDecoder(
            src_input=input_layer(src_emb, src_pos),
            tgt_input=input_layer(tgt_emb, tgt_pos),
            encoder=Stack([parts.encoder_layer(src_pos) for _ in range(n_enc)], parts.final_norm()),
            decoder=Stack([parts.decoder_layer(tgt_pos) for _ in range(n_dec)], parts.final_norm()),
            generator=generator,
            mask=mask,
            pad_id=d.pad_id,
        )
    _init_linear(model)
    return model


def _init_linear(model: nn.Module) -> None:
    """Xavier-uniform weights and zero biases for every linear layer (as in tensor2tensor / fairseq)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
