"""An estimate of the GPU memory one training run takes, for packing runs onto GPUs (``--runs-per-gpu auto``).

    weights, gradients and Adam's two moments:  16 bytes per parameter (fp32)
    activations kept for the backward pass:      per token and layer, 34 d + 5 h T bytes in 16-bit (Korthikanti
                                                 et al. 2022), twice that in fp32
    logits and their gradient:                   2 x tokens x V values
    the CUDA context and allocator slack:        1 GiB

times a safety factor of 1.25. It errs on the large side: packing then leaves room rather than running out.
"""

from __future__ import annotations

from omegaconf import DictConfig

from ablate.config.schema import Arch
from ablate.config.dims import dims, layer_counts
from ablate.train.precision import resolve_precision

CONTEXT_BYTES = 1 << 30
SAFETY = 1.25


def batch_tokens(cfg: DictConfig) -> int:
    """Tokens in a training batch: ``data.max_tokens`` for a task that batches by tokens, else batch size x length."""
    from ablate import registry

    reads = registry.get("task", cfg.data.task).reads()
    if "data.max_tokens" in reads:
        return int(cfg.data.max_tokens)
    return int(cfg.data.batch_size) * int(cfg.data.max_len)


def training_bytes(cfg: DictConfig, parameters: int) -> int:
    """Bytes of GPU memory a run of ``cfg`` (with ``parameters`` parameters) is expected to need at most."""
    d = dims(cfg.model)
    n_enc, n_dec = layer_counts(cfg.model)
    layers = n_dec if cfg.model.arch == Arch.decoder_only else n_enc + 2 * n_dec  # a decoder layer: two attentions
    tokens, T = batch_tokens(cfg), min(int(cfg.data.max_len), 1024)
    half = "16" in resolve_precision(str(cfg.trainer.precision), "gpu")
    activations = tokens * layers * (34 * d["d_model"] + 5 * d["n_heads"] * T) * (1 if half else 2)
    logits = 2 * tokens * cfg.data.vocab_size * 4
    return int(SAFETY * (16 * parameters + activations + logits + CONTEXT_BYTES))
