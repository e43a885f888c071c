"""Token embeddings and the pre-softmax projection (section 3.4), and how they share weights.

An embedding variant builds the three parts a model needs: the source embedding, the target
embedding (each ids (B, T) -> (B, T, d_model)) and the generator ((B, T, d_model) -> logits
(B, T, V)). Parts that share a matrix hold the same parameter, counted once. A decoder-only model
uses the target embedding and the generator only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.errors import ConfigError
from ablate.registry import declare_kind, register


class TokenEmbedding(nn.Embedding):
    """Token embedding, multiplied by sqrt(d_model) when ``scale`` (section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int, *, scale: bool):
        super().__init__(vocab_size, d_model)
        nn.init.normal_(self.weight, std=d_model**-0.5)
        self.multiplier = math.sqrt(d_model) if scale else 1.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids) * self.multiplier  # (B, T) -> (B, T, d_model)


class TiedGenerator(nn.Module):
    """Pre-softmax projection sharing an embedding matrix (section 3.4): logits = x E^T."""

    def __init__(self, embedding: nn.Embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.embedding.weight)  # (B, T, d_model) -> (B, T, V)

    def linear_head(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, E): the logits are x E^T, one product (:mod:`ablate.train.loss` then need not make them all)."""
        return x, self.embedding.weight  # (..., d_model), (V, d_model)

    def flops_per_token(self, length: int) -> float:
        """The product with the V x d_model matrix (its embedding, a sub-module, does none)."""
        return 2.0 * self.embedding.weight.numel()


class LinearGenerator(nn.Linear):
    """An untied pre-softmax projection (no bias): logits = x W^T, its own V x d_model matrix."""

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__(d_model, vocab_size, bias=False)

    def linear_head(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, W): the logits are x W^T, one product."""
        return x, self.weight  # (..., d_model), (V, d_model)


class Embeddings:
    """The three parts, built once; a model takes them as its children."""

    def __init__(self, source: nn.Module, target: nn.Module, generator: nn.Module):
        self.source, self.target, self.generator = source, target, generator


KIND = declare_kind("embedding", key="model.embedding", interface=Embeddings, default="tied",
                    description="source and target token embeddings and the pre-softmax projection, and which share "
                                "weights")


@register("embedding", "tied")
def tied(*, vocab_size: int, d_model: int, scale: bool = True) -> Embeddings:
    """One V x d_model matrix for the source, the target and the pre-softmax projection (Vaswani et al. 2017,
    section 3.4; the paper's)."""
    table = TokenEmbedding(vocab_size, d_model, scale=scale)
    return Embeddings(table, table, TiedGenerator(table))


@register("embedding", "two_way")
def two_way(*, vocab_size: int, d_model: int, scale: bool = True) -> Embeddings:
    """The target embedding and the pre-softmax projection share a matrix; the source has its own (Press & Wolf
    2017)."""
    target = TokenEmbedding(vocab_size, d_model, scale=scale)
    return Embeddings(TokenEmbedding(vocab_size, d_model, scale=scale), target, TiedGenerator(target))


@register("embedding", "untied")
def untied(*, vocab_size: int, d_model: int, scale: bool = True) -> Embeddings:
    """Separate source, target and pre-softmax (no bias) matrices: no tying (Sutskever et al. 2014)."""
    source, target = (TokenEmbedding(vocab_size, d_model, scale=scale) for _ in range(2))
    return Embeddings(source, target, LinearGenerator(d_model, vocab_size))


class FactorizedEmbedding(nn.Module):
    """E(ids) P: a V x d_embed table, projected up to d_model (ALBERT's factorisation)."""

    def __init__(self, table: TokenEmbedding, projection: nn.Linear):
        super().__init__()
        self.table, self.projection = table, projection

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.projection(self.table(ids))  # (B, T) -> (B, T, d_embed) -> (B, T, d_model)


class FactorizedGenerator(nn.Module):
    """logits = (x P^T) E^T: back down through the same projection, then the tied table."""

    def __init__(self, embedding: FactorizedEmbedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(*self.linear_head(x))  # (B, T, V)

    def linear_head(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x P^T, E): the logits are one product of the projected-down x with the table."""
        return x @ self.embedding.projection.weight, self.embedding.table.weight  # (..., d_embed), (V, d_embed)

    def flops_per_token(self, length: int) -> float:
        """The product with the V x d_embed table; the one through the projection is its sub-module's (the
        shared embedding's projection, d_model x d_embed either way)."""
        return 2.0 * self.embedding.table.weight.numel()


@register("embedding", "factorized")
def factorized(*, vocab_size: int, d_model: int, d_embed: int = 128, scale: bool = True) -> Embeddings:
    """A V x d_embed table and a d_embed x d_model projection, shared three ways (Lan et al. 2020, ALBERT)."""
    if not 0 < d_embed:
        raise ConfigError("model.embedding_args.d_embed", d_embed, "a positive integer")
    table = FactorizedEmbedding(TokenEmbedding(vocab_size, d_embed, scale=scale),
                                nn.Linear(d_embed, d_model, bias=False))
    return Embeddings(table, table, FactorizedGenerator(table))


@register("embedding", "factorized_untied")
def factorized_untied(*, vocab_size: int, d_model: int, d_embed: int = 128, scale: bool = True) -> Embeddings:
    """ALBERT's table and projection, each its own for the source, target and softmax (Lan et al. 2020, untied).

    Args:
        d_embed: the tables' width; each projection is d_embed x d_model.
        scale: multiply the table's rows by sqrt(d_embed), as ``factorized`` does.
    """
    if not 0 < d_embed:
        raise ConfigError("model.embedding_args.d_embed", d_embed, "a positive integer")

    def factorized_table() -> FactorizedEmbedding:
        return FactorizedEmbedding(TokenEmbedding(vocab_size, d_embed, scale=scale),
                                   nn.Linear(d_embed, d_model, bias=False))

    # The generator's own table and projection, used only for logits = (x P^T) E^T.
    return Embeddings(factorized_table(), factorized_table(), FactorizedGenerator(factorized_table()))
