"""``val/bleu`` during training: the validation split decoded at the end of every validation, by a solo run's model
(:class:`ValidationBleu`) or by each member of a seed array (:class:`MemberBleu`). Both score through one
:class:`SplitBleu`, so that a member's val/bleu is what its solo run's would be."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig
from torch import nn

from ablate.decode import translate
from ablate.metrics.bleu import corpus_bleu, detokenize
from ablate.model import build_model
from ablate.runs.metrics import VAL_BLEU

if TYPE_CHECKING:
    from ablate.train.fused_system import FusedSystem


def decodes_references(task: Any) -> bool:
    """Whether ``task`` has references to score translations against (a translation task)."""
    return hasattr(task, "references")


class SplitBleu:
    """sacreBLEU of a model's translations of a translation task's validation split (each task's split read once).

    Args:
        max_sentences: decode only the first N validation sentences (None: all of them).
        beam: 1 decodes greedily (cached decoder); more runs beam search with ``alpha``.
        batch_tokens: source tokens per decoding batch, counting every beam.
        max_len_b: at most |x| + max_len_b output tokens (section 6.1: 50).
    """

    def __init__(self, *, max_sentences: int | None = None, beam: int = 1, alpha: float = 0.6,
                 batch_tokens: int = 8192, max_len_b: int = 50):
        if max_sentences is not None and max_sentences < 1:
            raise ValueError(f"max_sentences={max_sentences} is not allowed; expected a positive integer or None")
        self.max_sentences, self.beam, self.alpha = max_sentences, beam, alpha
        self.batch_tokens, self.max_len_b = batch_tokens, max_len_b
        self._splits: dict[Any, tuple[list[list[int]], list[str]]] = {}  # task -> its sources and references

    def __call__(self, model: nn.Module, task: Any, d: DictConfig) -> float:
        """The BLEU score (0 .. 100) of ``model`` (in eval mode, on its device) on ``task``'s validation split;
        ``d``: the run's ``data`` config (its special token ids)."""
        if task not in self._splits:
            n = self.max_sentences
            self._splits[task] = list(task.encoded("val")["src_ids"][:n]), task.references("val")[:n]
        sources, references = self._splits[task]
        hypotheses = translate(model, sources, bos_id=d.bos_id, eos_id=d.eos_id, pad_id=d.pad_id, beam=self.beam,
                               alpha=self.alpha, max_len_b=self.max_len_b, batch_tokens=self.batch_tokens)
        return corpus_bleu(detokenize(hypotheses, task.tokenizer), references).score


class ValidationBleu(pl.Callback):
    """Logs ``val/bleu`` after each validation of a solo run: ``score`` (default: greedy, every sentence).

    Runs on rank zero only, for a data module with ``references``; does nothing for other tasks and during the sanity
    check. The time it takes falls inside validation, so ``train/tokens_per_s`` does not count it.
    """

    def __init__(self, score: SplitBleu | None = None):
        self.score = score or SplitBleu()

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        data = trainer.datamodule
        if trainer.sanity_checking or not trainer.is_global_zero or not decodes_references(data):
            return
        pl_module.log(VAL_BLEU, self.score(pl_module.model, data, pl_module.cfg.data), rank_zero_only=True)


class MemberBleu(pl.Callback):
    """Each running member's ``val/bleu`` after each validation of a seed array (:mod:`ablate.train.array`).

    Member k's weights are copied into one solo model of the members' config (:meth:`FusedModel.load_member`), which
    decodes member k's own task's validation split as :class:`ValidationBleu` decodes its solo run's. The scores join
    the members' validation metrics, ``pl_module.val_metrics["val/bleu"]`` ((K,), NaN for a member that is out), which
    :class:`ablate.train.members.Members` logs and records at the same hook: this callback must come before it.

    Member by member, not vmapped: the search branches on its tensors' values (a batch ends when each of its
    sentences has, beams are kept by score), which ``torch.func.vmap`` cannot batch, and the member's solo model is
    what its solo run decodes with, so the two decode alike. Copying a member in costs one pass over its weights.

    Args:
        score: what a member's val/bleu is (default: greedy, every sentence), as :class:`ValidationBleu`'s.
    """

    def __init__(self, score: SplitBleu | None = None):
        self.score = score or SplitBleu()
        self._solo: nn.Module | None = None  # the solo model each member is copied into, built once

    def on_validation_end(self, trainer: pl.Trainer, pl_module: FusedSystem) -> None:
        tasks = trainer.datamodule.tasks
        if trainer.sanity_checking or not decodes_references(tasks[0]):
            return
        # float32: what Lightning's self.log makes of the Python float a solo run logs
        scores = torch.full((pl_module.k,), math.nan, dtype=torch.float32)  # (K,)
        for k, out in enumerate(pl_module.out.tolist()):
            if not out:
                model = pl_module.model.load_member(k, self._solo_model(pl_module))
                scores[k] = self.score(model, tasks[k], pl_module.cfgs[k].data)
        pl_module.val_metrics[VAL_BLEU] = scores

    def _solo_model(self, pl_module: FusedSystem) -> nn.Module:
        if self._solo is None:
            # building draws initial weights: from a forked random state, not the training's; outside validation's
            # inference mode, so that the loads into it are ordinary writes
            with torch.random.fork_rng(devices=[]), torch.inference_mode(False):
                solo = build_model(pl_module.cfg)
            like = next(iter(pl_module.model.params().values()))  # (K, ...) on the array's device, in its dtype
            self._solo = solo.to(device=like.device, dtype=like.dtype).eval().requires_grad_(False)
        return self._solo
