"""Greedy decoding and beam search: known answers on toy models, and properties on a tiny Transformer."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import ablate
from ablate.decode import beam_search, greedy, length_penalty, translate
from ablate.decode.steps import max_lengths
from tests.conftest import TINY

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4
IDS = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)


class _NoState:
    def select(self, index: torch.Tensor) -> None:
        pass

    reorder = select


class MarkovToy(nn.Module):
    """A decoder whose next-token distribution depends on the previous token only: a (V, V) table
    (uniform after a token the table leaves out)."""

    incremental = True

    def __init__(self, table: dict[int, dict[int, float]], vocab: int = 5):
        super().__init__()
        probs = torch.full((vocab, vocab), 1 / vocab)
        for prev, nxt in table.items():
            probs[prev] = 0.0
            for token, p in nxt.items():
                probs[prev, token] = p
        self.log_probs = nn.Parameter(probs.log())

    def start_decoding(self, src_ids: torch.Tensor, repeat: int = 1) -> _NoState:
        return _NoState()

    def decode_step(self, tgt_ids: torch.Tensor, state: _NoState) -> torch.Tensor:
        return self.log_probs[tgt_ids]  # (N, T, V)


def _src(*lengths: int) -> torch.Tensor:
    """Source ids (B, S) with the given real lengths, padded at the end."""
    src = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = A
    return src


def test_length_penalty_is_the_gnmt_formula():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx(2**0.6)
    assert length_penalty(30, 0.0) == 1.0


def test_beam_search_finds_what_greedy_misses():
    # Greedy takes a (0.6) and then ends (0.34): P = 0.204. Beam 2 also keeps b (0.4), then ends (0.9): P = 0.36.
    toy = MarkovToy({BOS: {A: 0.6, B: 0.4}, A: {EOS: 0.34, A: 0.33, B: 0.33}, B: {EOS: 0.9, A: 0.05, B: 0.05}})
    src = _src(3)
    assert greedy(toy, src, **IDS) == [[A]]
    assert beam_search(toy, src, beam=1, **IDS) == [[A]]
    assert beam_search(toy, src, beam=2, **IDS) == [[B]]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0, 5.0])
def test_length_penalty_decides_between_a_short_and_a_long_hypothesis(alpha):
    toy = MarkovToy({BOS: {EOS: 0.55, A: 0.45}, A: {EOS: 1.0}})  # [] with P 0.55, or [a] with P 0.45
    short, long = math.log(0.55) / length_penalty(1, alpha), math.log(0.45) / length_penalty(2, alpha)
    expected = [[A]] if long > short else [[]]
    assert beam_search(toy, _src(2), beam=2, alpha=alpha, **IDS) == expected
    assert expected == ([[A]] if alpha >= 2 else [[]])  # the formula does change the answer in this range


def test_output_stops_at_eos_and_never_contains_specials():
    toy = MarkovToy({BOS: {A: 1.0}, A: {B: 1.0}, B: {EOS: 1.0}})
    for search in (greedy, beam_search):
        assert search(toy, _src(4, 1), **IDS) == [[A, B], [A, B]]


@pytest.mark.parametrize("a,b", [(1, 3), (0.5, 2), (0, 1)])
def test_max_length_is_respected_per_sentence(a, b):
    toy = MarkovToy({BOS: {A: 0.6, B: 0.4}, A: {A: 0.6, B: 0.4}, B: {A: 0.6, B: 0.4}})  # never ends by itself
    src = _src(2, 5, 3)
    expected = [int(a * n + b) for n in (2, 5, 3)]
    assert [len(h) for h in greedy(toy, src, max_len_a=a, max_len_b=b, **IDS)] == expected
    assert [len(h) for h in beam_search(toy, src, max_len_a=a, max_len_b=b, **IDS)] == expected


def _tiny(*overrides: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return ablate.build_model(ablate.load_config(None, TINY + ["data.vocab_size=40", *overrides]))


def _batch(seed: int = 0) -> tuple[torch.Tensor, list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = [7, 3, 5, 1, 6]
    src = torch.randint(3, 40, (len(lengths), max(lengths)), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
    return src, lengths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_of_one_is_greedy(seed):
    model, (src, _) = _tiny(seed=seed), _batch(seed)
    assert beam_search(model, src, beam=1, max_len_b=12, **IDS) == greedy(model, src, max_len_b=12, **IDS)


@pytest.mark.parametrize("beam", [1, 4])
def test_batched_results_equal_one_by_one(beam):
    model, (src, lengths) = _tiny(), _batch()
    settings = dict(beam=beam, max_len_b=12, **IDS)
    batched = beam_search(model, src, **settings)
    alone = [beam_search(model, src[i : i + 1, :n], **settings)[0] for i, n in enumerate(lengths)]
    assert batched == alone
    sources = [src[i, :n].tolist() for i, n in enumerate(lengths)]
    assert translate(model, sources, batch_tokens=2 * beam * 7, **settings) == alone  # sorted batches, input order
    assert all(len(h) <= n + 12 and not {PAD, BOS, EOS} & set(h) for h, n in zip(batched, lengths))


@pytest.mark.parametrize("positional", ["sinusoidal", "rope"])
def test_cached_and_recomputed_decoding_agree(positional):
    model, (src, _) = _tiny(f"model.positional={positional}"), _batch()
    for search in (greedy, beam_search):
        assert search(model, src, max_len_b=12, **IDS) == search(model, src, max_len_b=12, cache=False, **IDS)


def test_a_mask_that_looks_ahead_decodes_by_recomputing():
    model, (src, _) = _tiny("model.mask=none"), _batch()
    assert not model.incremental
    with pytest.raises(ValueError, match="cannot decode incrementally"):
        greedy(model, src, cache=True, **IDS)
    assert greedy(model, src, max_len_b=5, **IDS) == greedy(model, src, max_len_b=5, cache=False, **IDS)


def test_a_learned_position_table_caps_the_output_length():
    model, (src, _) = _tiny("model.positional=learned", "model.positional_args.max_len=9"), _batch()
    assert max_lengths(src, model, pad_id=PAD, a=1, b=50).max() == 9
    assert max(len(h) for h in beam_search(model, src, **IDS)) <= 9  # no position past the table


def test_decoding_restores_training_mode():
    model, (src, _) = _tiny(), _batch()
    model.train()
    greedy(model, src, max_len_b=3, **IDS)
    assert model.training
