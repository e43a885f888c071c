"""sacreBLEU on detokenized text: the score, the signature, the tokenization it applies."""

from __future__ import annotations

import pytest

from ablate.data.tokenizer import Tokenizer, TokenizerSettings, train
from ablate.metrics.bleu import corpus_bleu, detokenize

REFS = ["Ein Mann fährt mit dem Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch."]


def test_identical_text_scores_100_with_a_13a_signature():
    bleu = corpus_bleu(REFS, REFS)
    assert bleu.score == pytest.approx(100.0)
    assert bleu.signature.startswith("nrefs:1|") and "|tok:13a|" in bleu.signature
    assert bleu.line.startswith(f"BLEU|{bleu.signature} = 100.00")


def test_13a_splits_punctuation_so_spacing_before_a_full_stop_does_not_matter():
    spaced = [r.replace(".", " .") for r in REFS]
    assert corpus_bleu(spaced, REFS).score == pytest.approx(100.0)
    untokenized = corpus_bleu(spaced, REFS, tokenize="none")
    assert "|tok:none|" in untokenized.signature and untokenized.score < 100.0


def test_wrong_words_lower_the_score():
    assert corpus_bleu(["Ein Hund fährt mit dem Auto.", *REFS[1:]], REFS).score < 100.0
    assert corpus_bleu(["x", "y", "z"], REFS).score == pytest.approx(0.0)


def test_a_hypothesis_per_reference_is_required():
    with pytest.raises(ValueError, match="2 hypotheses for 3 references"):
        corpus_bleu(REFS[:2], REFS)


def test_detokenize_undoes_sentencepiece():
    settings = TokenizerSettings(vocab_size=60, model_type="bpe")
    tokenizer = Tokenizer(train(REFS * 20, settings))
    ids = [tokenizer.encode(r) for r in REFS]
    assert detokenize(ids, tokenizer) == REFS
    assert corpus_bleu(detokenize(ids, tokenizer), REFS).score == pytest.approx(100.0)
