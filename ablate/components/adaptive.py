"""Frequency clusters of the vocabulary: the adaptive softmax (Grave et al. 2017) and adaptive input
representations tied with it (Baevski & Auli 2019).

The vocabulary is cut at ids c_1 < ... < c_n into clusters [0, c_1), [c_1, c_2), ..., [c_n, V); cluster i gets
d_model / div_value^i dimensions, so rare words cost fewer parameters. Both variants assume the token ids are
ordered by frequency, id 0 the most frequent: sentencepiece's BPE ids roughly are (pieces come in merge order).
Both return the full, normalised log-probabilities (B, T, V), so the training loss and decoding stay exact: there
is no speed-up here, only the papers' parameterisation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ablate.components.embedding import Embeddings, TokenEmbedding
from ablate.errors import ConfigError
from ablate.registry import register

CUTOFFS = "0.25,0.5"  # fractions of V: a tiny test vocabulary (V = 24) gets clusters [0, 6), [6, 12), [12, 24)


def parse_cutoffs(cutoffs: str, vocab_size: int) -> list[int]:
    """The clusters' first ids c_1 < ... < c_n from a string such as ``"0.25,0.5"`` or ``"20000,60000"``.

    Args:
        cutoffs: comma-separated values, each a fraction of V (below 1, rounded to the nearest id) or a token id
            (a whole number from 1 up).
        vocab_size: V.

    Returns:
        The ids, increasing, each within (0, V).

    Raises:
        ConfigError: a value that is not a number, a token id that is not whole, or ids not increasing within (0, V).
    """
    allowed = (f"comma-separated increasing fractions of V (below 1) or token ids, each within (0, {vocab_size}), "
               f"e.g. {CUTOFFS!r}")
    try:
        values = [float(v) for v in str(cutoffs).split(",")]
    except ValueError:
        raise ConfigError("model.embedding_args.cutoffs", cutoffs, allowed) from None
    if not all(math.isfinite(v) and v > 0 and (v < 1 or v == int(v)) for v in values):
        raise ConfigError("model.embedding_args.cutoffs", cutoffs, allowed)
    ids = [round(v * vocab_size) if v < 1 else int(v) for v in values]
    if ids[0] <= 0 or ids[-1] >= vocab_size or any(b <= a for a, b in zip(ids, ids[1:])):
        raise ConfigError("model.embedding_args.cutoffs", cutoffs, f"{allowed} (gives ids {ids})")
    return ids


def cluster_dims(d_model: int, div_value: float, n_clusters: int) -> list[int]:
    """d_i = floor(d_model / div_value^i) for clusters i = 0..n_clusters-1 (torch's and fairseq's rounding).

    Raises:
        ConfigError: ``div_value`` below 1, or so large that the last cluster gets no dimension.
    """
    if not (math.isfinite(div_value) and div_value >= 1):
        raise ConfigError("model.embedding_args.div_value", div_value,
                          "a number >= 1 (rarer clusters get fewer dimensions)")
    dims = [int(d_model // div_value**i) for i in range(n_clusters)]
    if dims[-1] < 1:
        raise ConfigError("model.embedding_args.div_value", div_value,
                          f"small enough that the last of {n_clusters} clusters keeps a dimension "
                          f"(d_model / div_value^{n_clusters - 1} >= 1, d_model = {d_model}), or fewer cutoffs")
    return dims


class AdaptiveSoftmax(nn.Module):
    """Grave et al. 2017: torch's ``AdaptiveLogSoftmaxWithLoss``, its full log-probabilities (B, T, V).

    The head scores the first cluster's words and one logit per tail cluster; tail cluster i projects x down to
    d_model / div_value^(i+1) and scores its words; log p(w) = log p_head(cluster) + log p_cluster(w). Every
    product is an ``nn.Linear`` of the torch module, so the FLOP count needs no declaration.
    """

    def __init__(self, d_model: int, vocab_size: int, cutoffs: list[int], div_value: float):
        super().__init__()
        self.softmax = nn.AdaptiveLogSoftmaxWithLoss(d_model, vocab_size, cutoffs, div_value=div_value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        log_p = self.softmax.log_prob(x.reshape(-1, x.size(-1)))  # (B*T, d_model) -> (B*T, V)
        return log_p.view(*x.shape[:-1], -1)  # (B, T, V)


@register("embedding", "adaptive_softmax")
def adaptive_softmax(*, vocab_size: int, d_model: int, cutoffs: str = CUTOFFS, div_value: float = 4.0,
                     scale: bool = True) -> Embeddings:
    """Separate source and target tables, and the adaptive softmax as the generator (Grave et al. 2017).

    Args:
        cutoffs: the clusters' first ids, fractions of V or token ids (see :func:`parse_cutoffs`); the ids are
            assumed ordered by frequency. The full log-probabilities are computed: exact loss, no speed-up.
        div_value: tail cluster i is scored from d_model / div_value^(i+1) dimensions.
        scale: multiply the input embeddings by sqrt(d_model) (section 3.4).
    """
    ids = parse_cutoffs(cutoffs, vocab_size)
    cluster_dims(d_model, div_value, len(ids) + 1)
    source, target = (TokenEmbedding(vocab_size, d_model, scale=scale) for _ in range(2))
    return Embeddings(source, target, AdaptiveSoftmax(d_model, vocab_size, ids, float(div_value)))


class AdaptiveInput(nn.Module):
    """Baevski & Auli 2019: token w of cluster i is E_i[w - c_i] P_i (times sqrt(d_model) when ``scale``).

    E_i is cluster i's V_i x d_i table, P_i its d_i x d_model projection (an ``nn.Linear(d_i, d_model)``, weight
    P_i^T). Static shapes, so that it runs on the meta device: every token is embedded through every cluster with
    its index clamped into the cluster, and the cluster's mask selects, by multiplication, the one that holds it.
    This costs every cluster's projection for every token (sum_i 2 d_i d_model FLOPs), not only its own cluster's.
    """

    def __init__(self, d_model: int, bounds: list[int], dims: list[int], *, scale: bool):
        super().__init__()
        self.bounds = bounds  # [0, c_1, ..., c_n, V]
        self.tables = nn.ModuleList(nn.Embedding(stop - start, d) for start, stop, d in zip(bounds, bounds[1:], dims))
        self.projections = nn.ModuleList(nn.Linear(d, d_model, bias=False) for d in dims)
        for table, projection in zip(self.tables, self.projections):  # fairseq's AdaptiveInput initialisation
            nn.init.normal_(table.weight, std=table.embedding_dim**-0.5)
            nn.init.xavier_uniform_(projection.weight)
        self.multiplier = math.sqrt(d_model) if scale else 1.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = 0.0
        for start, stop, table, projection in zip(self.bounds, self.bounds[1:], self.tables, self.projections):
            inside = ((ids >= start) & (ids < stop)).unsqueeze(-1)  # (B, T, 1)
            e = projection(table((ids - start).clamp(0, stop - start - 1)))  # (B, T) -> (B, T, d_i) -> (B, T, d_model)
            out = out + e * inside.to(e.dtype)  # (B, T, d_model)
        return out * self.multiplier  # (B, T, d_model)


class TiedAdaptiveSoftmax(nn.Module):
    """The adaptive softmax reusing the adaptive input's tables and projections (Baevski & Auli 2019, tied).

    Cluster i's words score (x P_i^T) E_i^T: x goes down through the cluster's projection transposed, then through
    its table; the head's words too (fairseq leaves out the head's projection; here every cluster is the exact
    transpose of its embedding). The head adds one logit per tail cluster (its own ``nn.Linear``);
    log p(w) = log softmax(head)[cluster] + log softmax(cluster's scores)[w], computed for all V.
    """

    def __init__(self, embedding: AdaptiveInput):
        super().__init__()
        self.embedding = embedding
        n_tail = len(embedding.tables) - 1
        self.cluster_logits = nn.Linear(embedding.projections[0].out_features, n_tail, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = [F.linear(x @ projection.weight, table.weight)  # (B, T, d_model) -> (B, T, d_i) -> (B, T, V_i)
                  for table, projection in zip(self.embedding.tables, self.embedding.projections)]
        head = F.log_softmax(torch.cat([scores[0], self.cluster_logits(x)], dim=-1), dim=-1)  # (B, T, V_0 + n)
        v0 = scores[0].size(-1)
        tails = [F.log_softmax(s, dim=-1) + head[..., v0 + i:v0 + i + 1]  # (B, T, V_i)
                 for i, s in enumerate(scores[1:])]
        return torch.cat([head[..., :v0], *tails], dim=-1)  # (B, T, V)

    def flops_per_token(self, length: int) -> float:
        """The products with the V_i x d_i tables; the ones through the projections (d_model x d_i each way) are
        counted by the walk through the shared embedding, a sub-module."""
        return 2.0 * sum(table.weight.numel() for table in self.embedding.tables)


@register("embedding", "adaptive_input")
def adaptive_input(*, vocab_size: int, d_model: int, cutoffs: str = CUTOFFS, div_value: float = 4.0,
                   scale: bool = True) -> Embeddings:
    """Adaptive input embeddings shared by source and target and tied with an adaptive softmax (Baevski & Auli 2019).

    Args:
        cutoffs: the clusters' first ids, fractions of V or token ids (see :func:`parse_cutoffs`); the ids are
            assumed ordered by frequency. The full log-probabilities are computed: exact loss, no speed-up.
        div_value: cluster i is embedded in d_model / div_value^i dimensions.
        scale: multiply the embeddings by sqrt(d_model) (section 3.4), after the projection.
    """
    ids = parse_cutoffs(cutoffs, vocab_size)
    dims = cluster_dims(d_model, div_value, len(ids) + 1)
    table = AdaptiveInput(d_model, [0, *ids, vocab_size], dims, scale=scale)
    return Embeddings(table, table, TiedAdaptiveSoftmax(table))
