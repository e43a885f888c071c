"""An estimate of training FLOPs per target token, for sweep planning (``ablate sweep --dry-run``)."""

from __future__ import annotations

from omegaconf import DictConfig

from ablate.config.schema import Arch
from ablate.model.builder import dims


def flops_per_token(cfg: DictConfig, seq_len: int | None = None) -> float:
    """Training FLOPs per target token: 6 x (multiply-accumulates of the weight matrices) plus the
    attention scores and weighted sums, with sources and targets both ``seq_len`` long (default
    ``data.max_len`` capped at 512).

    Forward FLOPs are 2 per multiply-accumulate; backward is twice the forward (Kaplan et al. 2020).
    Biases, norms, softmax and the embedding lookup are left out. The FFN counts d_ff-wide matrices:
    two for relu/gelu, three for swiglu.
    """
    m, d = cfg.model, dims(cfg.model)
    T = seq_len or min(cfg.data.max_len, 512)
    h, d_model = d["n_heads"], d["d_model"]
    attn = d_model * h * (2 * d["d_k"] + d["d_v"]) + h * d["d_v"] * d_model  # Q, K, V, O projections
    ffn = (3 if m.ffn == "swiglu" else 2) * d_model * d["d_ff"]
    scores = T * h * (d["d_k"] + d["d_v"])  # QK^T and AV, per query
    n_enc = m.n_encoder_layers or m.n_layers
    n_dec = m.n_decoder_layers or m.n_layers
    if m.arch == Arch.decoder_only:
        macs = n_dec * (attn + ffn + scores)
    else:  # per target token, with one source token per target token
        macs = n_enc * (attn + ffn + scores) + n_dec * (2 * attn + ffn + 2 * scores)
    macs += d_model * cfg.data.vocab_size  # the pre-softmax projection
    return 6.0 * macs
