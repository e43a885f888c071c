"""The shared sentencepiece tokenizer: special ids, exact vocab size, round trip, on-disk cache."""

from __future__ import annotations

import random

import pytest

from ablate.data import tokenizer as tok
from ablate.data.tokenizer import TokenizerSettings, train_or_load
from ablate.errors import ConfigError

IDENTITY = {"corpus": "synthetic", "seed": 0}


def corpus(n: int = 2000) -> list[str]:
    """Seeded sentences over a small made-up lexicon."""
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyzäöü"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(300)]
    return [" ".join(rng.choices(words, k=rng.randint(3, 15))).capitalize() + "." for _ in range(n)]


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    """Counts calls to the trainer."""
    calls: list[int] = []
    real = tok.train

    def counting(sentences, settings):
        calls.append(settings.vocab_size)
        return real(sentences, settings)

    monkeypatch.setattr(tok, "train", counting)
    return calls


def test_special_ids_and_exact_vocab_size(tmp_path):
    t = train_or_load(corpus(), settings=TokenizerSettings(vocab_size=300), identity=IDENTITY, cache_dir=str(tmp_path))
    assert (t.pad_id, t.bos_id, t.eos_id, t.unk_id) == (0, 1, 2, 3)
    assert t.vocab_size == 300
    assert [t.sp.id_to_piece(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_round_trip(tmp_path):
    t = train_or_load(corpus(), settings=TokenizerSettings(vocab_size=300), identity=IDENTITY, cache_dir=str(tmp_path))
    sentence = corpus(1)[0]
    ids = t.encode(sentence)
    assert all(3 < i < 300 for i in ids)
    assert t.decode(ids) == sentence
    assert t.decode([t.bos_id, *ids, t.eos_id, t.pad_id, t.pad_id]) == sentence  # specials decode to nothing
    assert t.encode_batch([sentence, sentence]) == [ids, ids]


def test_second_build_loads_from_cache(tmp_path, counted):
    settings = TokenizerSettings(vocab_size=300)
    first = train_or_load(corpus(), settings=settings, identity=IDENTITY, cache_dir=str(tmp_path))
    model = first.path / tok.MODEL_FILE
    mtime = model.stat().st_mtime_ns
    untouched = iter(corpus())
    second = train_or_load(untouched, settings=settings, identity=IDENTITY, cache_dir=str(tmp_path))
    assert counted == [300]
    assert (first.from_cache, second.from_cache) == (False, True)
    assert model.stat().st_mtime_ns == mtime
    assert next(untouched) == corpus(1)[0]  # the sentences were not even read
    assert second.encode("Abc def.") == first.encode("Abc def.")
    assert sorted(p.name for p in model.parent.parent.iterdir()) == [model.parent.name]  # no temp folders left


def test_different_settings_or_data_make_new_entries(tmp_path, counted):
    base = dict(identity=IDENTITY, cache_dir=str(tmp_path))
    a = train_or_load(corpus(), settings=TokenizerSettings(vocab_size=300), **base)
    b = train_or_load(corpus(), settings=TokenizerSettings(vocab_size=320), **base)
    c = train_or_load(corpus(), settings=TokenizerSettings(vocab_size=300, model_type="unigram"), **base)
    d = train_or_load(
        corpus(), settings=TokenizerSettings(vocab_size=300), identity={"other": 1}, cache_dir=str(tmp_path)
    )
    assert len({a.path, b.path, c.path, d.path}) == 4
    assert counted == [300, 320, 300, 300]
    assert b.vocab_size == 320


def test_training_is_quiet(tmp_path, capfd):
    train_or_load(corpus(), settings=TokenizerSettings(vocab_size=300), identity=IDENTITY, cache_dir=str(tmp_path))
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_unreachable_vocab_size_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="data.vocab_size"):
        train_or_load(
            corpus(50), settings=TokenizerSettings(vocab_size=50_000), identity=IDENTITY, cache_dir=str(tmp_path)
        )
    assert not any((tmp_path / "tokenizers").glob("*/spm.model"))


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [({"model_type": "wordpiece"}, "model_type"), ({"pad_id": 1}, "pad_id"), ({"vocab_size": 3}, "vocab_size")],
)
def test_bad_settings(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        TokenizerSettings(**{"vocab_size": 300, **kwargs})
