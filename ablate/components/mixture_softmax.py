"""Mixture of softmaxes (Yang et al. 2018, "Breaking the Softmax Bottleneck"): a generator of rank above d_model.

A single softmax's log-probabilities x E^T have rank at most d_model; a mixture of K softmaxes is not bound by it:
p(w | x) = sum_k pi_k softmax(h_k E^T)_w, with the prior pi = softmax(x W_pi) and the context vectors
h_k = tanh(x W_k). E is the embedding matrix, tied three ways as in the paper.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.embedding import Embeddings, TokenEmbedding
from ablate.errors import ConfigError
from ablate.registry import register


class MixtureOfSoftmaxes(nn.Module):
    """log p = logsumexp_k (log pi_k + log_softmax(h_k E^T)): the mixture's log-probabilities (B, T, V), stably.

    W_pi (d_model x K) and the K context matrices W_k (d_model x d_model, one ``nn.Linear`` to K * d_model) have no
    bias, as in the paper's equations (its code adds one to W_k).
    """

    def __init__(self, embedding: TokenEmbedding, n_components: int):
        super().__init__()
        d_model = embedding.embedding_dim
        self.embedding, self.n_components = embedding, n_components
        self.prior = nn.Linear(d_model, n_components, bias=False)  # W_pi
        self.context = nn.Linear(d_model, n_components * d_model, bias=False)  # [W_1 ... W_K]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        log_pi = F.log_softmax(self.prior(x), dim=-1)  # (B, T, K)
        h = torch.tanh(self.context(x)).unflatten(-1, (self.n_components, -1))  # (B, T, K, d_model)
        log_p = F.log_softmax(F.linear(h, self.embedding.weight), dim=-1)  # (B, T, K, V)
        return torch.logsumexp(log_pi.unsqueeze(-1) + log_p, dim=-2)  # (B, T, V)

    def flops_per_token(self, length: int) -> float:
        """The K products with the V x d_model embedding matrix (the embedding, a sub-module, does none)."""
        return 2.0 * self.n_components * self.embedding.weight.numel()


@register("embedding", "mos")
def mos(*, vocab_size: int, d_model: int, n_components: int = 4, scale: bool = True) -> Embeddings:
    """A mixture of K softmaxes over the tied embedding matrix as the generator (Yang et al. 2018, MoS).

    Args:
        n_components: K, the softmaxes mixed (K = 1 is one softmax over tanh(x W_1) E^T).
        scale: multiply the embeddings by sqrt(d_model) (section 3.4).
    """
    if not n_components >= 1:
        raise ConfigError("model.embedding_args.n_components", n_components, "a positive integer")
    table = TokenEmbedding(vocab_size, d_model, scale=scale)
    return Embeddings(table, table, MixtureOfSoftmaxes(table, n_components))
