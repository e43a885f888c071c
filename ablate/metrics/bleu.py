"""Corpus BLEU with sacreBLEU (Post 2018) on detokenized text, reported with its signature.

Hypotheses are sentencepiece-decoded to plain text and scored against the raw references,
so the tokenization BLEU sees is sacreBLEU's own (``13a`` by default), not the model's subwords.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from sacrebleu.metrics import BLEU

from ablate.data.tokenizer import Tokenizer


class Bleu(NamedTuple):
    """A corpus BLEU score and what identifies how it was computed."""

    score: float  # 0 .. 100
    signature: str  # e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    line: str  # sacreBLEU's report: "BLEU|<signature> = 35.12 66.1/41.9/28.0/19.3 (BP = ... hyp_len = ...)"


def detokenize(hypotheses: Sequence[Sequence[int]], tokenizer: Tokenizer) -> list[str]:
    """Token ids -> text, one line each (sentencepiece decode; a stray line break becomes a space)."""
    return [" ".join(tokenizer.decode(ids).split("\n")) for ids in hypotheses]


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "13a") -> Bleu:
    """sacreBLEU corpus BLEU of detokenized ``hypotheses`` against one reference each.

    Args:
        hypotheses: system outputs as plain text, one per sentence.
        references: the raw reference sentences, in the same order.
        tokenize: sacreBLEU's tokenizer (``13a``, its default and WMT's; ``intl``, ``char``, ...).

    Returns:
        The score, the signature string and sacreBLEU's one-line report.

    Raises:
        ValueError: the two lists differ in length.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references; expected one each")
    metric = BLEU(tokenize=tokenize)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    signature = str(metric.get_signature())
    return Bleu(result.score, signature, result.format(signature=signature))
