"""``val/bleu`` during training: decode the validation split at the end of every validation."""

from __future__ import annotations

import pytorch_lightning as pl

from ablate.decode import translate
from ablate.metrics.bleu import corpus_bleu, detokenize


class ValidationBleu(pl.Callback):
    """Logs ``val/bleu``: sacreBLEU of greedy translations (cached decoder) of the validation split.

    Runs on rank zero only, after each validation of a translation run (a data module with
    ``references``); does nothing for other tasks and during the sanity check. The time it
    takes falls inside validation, so ``train/tokens_per_s`` does not count it.

    Args:
        max_sentences: decode only the first N validation sentences (None: all of them).
        beam: 1 decodes greedily; more runs beam search with ``alpha``.
        batch_tokens: source tokens per decoding batch, counting every beam.
        max_len_b: at most |x| + max_len_b output tokens (section 6.1: 50).
    """

    def __init__(self, *, max_sentences: int | None = None, beam: int = 1, alpha: float = 0.6,
                 batch_tokens: int = 8192, max_len_b: int = 50):
        if max_sentences is not None and max_sentences < 1:
            raise ValueError(f"max_sentences={max_sentences} is not allowed; expected a positive integer or None")
        self.max_sentences, self.beam, self.alpha = max_sentences, beam, alpha
        self.batch_tokens, self.max_len_b = batch_tokens, max_len_b
        self._split: tuple[list[list[int]], list[str]] | None = None  # sources and references, read once

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        data = trainer.datamodule
        if trainer.sanity_checking or not trainer.is_global_zero or not hasattr(data, "references"):
            return
        if self._split is None:
            n = self.max_sentences
            self._split = list(data.encoded("val")["src_ids"][:n]), data.references("val")[:n]
        sources, references = self._split
        d = pl_module.cfg.data
        hypotheses = translate(pl_module.model, sources, bos_id=d.bos_id, eos_id=d.eos_id, pad_id=d.pad_id,
                               beam=self.beam, alpha=self.alpha, max_len_b=self.max_len_b,
                               batch_tokens=self.batch_tokens)
        bleu = corpus_bleu(detokenize(hypotheses, data.tokenizer), references)
        pl_module.log("val/bleu", bleu.score, rank_zero_only=True)
