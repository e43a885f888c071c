"""ALiBi and T5's relative position bias against their papers' definitions, computed here by hand."""

from __future__ import annotations

import math

import pytest
import torch

import ablate
from ablate.components.position_bias import ALiBi, T5RelativeBias, alibi_slopes, t5_bucket
from tests.conftest import TINY


def test_alibi_slopes_are_the_papers_geometric_sequence():
    """Press et al. 2022, section 3: for 8 heads, 1/2^1 ... 1/2^8; for 16 heads, 1/2^0.5 ... 1/2^8."""
    assert alibi_slopes(8) == pytest.approx([2.0**-k for k in range(1, 9)])
    assert alibi_slopes(16) == pytest.approx([2.0 ** (-k / 2) for k in range(1, 17)])
    # Not a power of two (their code): the 4-head slopes, then every other 8-head slope.
    assert alibi_slopes(6) == pytest.approx([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3])


def test_alibi_bias_is_minus_slope_times_distance_and_follows_the_last_queries():
    alibi = ALiBi(n_heads=2)  # slopes 1/16 and 1/256
    bias = alibi.score_bias(4, 4)  # (h, T, T)
    for h, m in enumerate((2.0**-4, 2.0**-8)):
        for i in range(4):
            for j in range(4):
                assert bias[h, i, j].item() == pytest.approx(-m * abs(i - j))
    assert torch.equal(alibi.score_bias(1, 4)[:, 0], bias[:, 3])  # one new query: the last row


# T5's bucketing (Raffel et al. 2020; its reference function `_relative_position_bucket`), 32 buckets,
# max_distance 128, worked out by hand for key - query positions:
#   bidirectional: 16 buckets a side; |d| < 8 exact; else 8 + floor(log(|d|/8) / log(128/8) * 8), at most 15;
#                  keys after the query add 16.
#   unidirectional: keys after the query -> 0; d = query - key < 16 exact; else 16 + floor(log(d/16) / log(8) * 16),
#                   at most 31.
BIDIRECTIONAL = {0: 0, -1: 1, 1: 17, -7: 7, 7: 23, -8: 8, -12: 9, -16: 10, -32: 12, 32: 28, -64: 14, -127: 15,
                 -128: 15, -1000: 15, 1000: 31}
UNIDIRECTIONAL = {0: 0, 1: 0, 50: 0, -1: 1, -15: 15, -16: 16, -31: 21, -32: 21, -64: 26, -127: 31, -128: 31, -5000: 31}


@pytest.mark.parametrize("bidirectional,table", [(True, BIDIRECTIONAL), (False, UNIDIRECTIONAL)])
def test_t5_buckets_match_the_reference_values(bidirectional, table):
    relative = torch.tensor(list(table))
    got = t5_bucket(relative, bidirectional=bidirectional, num_buckets=32, max_distance=128)
    assert got.tolist() == list(table.values())


def test_hand_worked_buckets_follow_the_log_formula():
    """The table above, checked against the formula once more with math.log (not torch)."""
    for d, bucket in BIDIRECTIONAL.items():
        n = abs(d)
        expected = n if n < 8 else min(15, 8 + int(math.log(n / 8) / math.log(16) * 8))
        assert bucket == expected + (16 if d > 0 else 0), d
    for d, bucket in UNIDIRECTIONAL.items():
        n = max(-d, 0)
        assert bucket == (n if n < 16 else min(31, 16 + int(math.log(n / 16) / math.log(8) * 16))), d


def test_t5_bias_is_bidirectional_in_the_encoder_and_causal_in_the_decoder():
    enc = T5RelativeBias(n_heads=3, d_model=8, stack="encoder")
    dec = T5RelativeBias(n_heads=3, d_model=8, stack="decoder")
    e, d = enc.score_bias(5, 5), dec.score_bias(5, 5)  # (h, T, T)
    assert e.shape == d.shape == (3, 5, 5)
    assert not torch.allclose(e[:, 1, 2], e[:, 2, 1])  # a key before and after the query differ in the encoder
    assert torch.equal(d[:, 1, 2], d[:, 1, 1])  # in the decoder a later key shares the query's own bucket
    assert torch.equal(e[:, 0, 3], enc.bias.weight[t5_bucket(torch.tensor(3), bidirectional=True)])


@pytest.mark.parametrize("positional", ["alibi", "t5_bias"])
def test_a_score_bias_changes_attention_only_through_the_scores(positional):
    """No embedding is added: the stack's input is the scaled token embedding alone, and swapping two source
    tokens changes the encoder output (positions matter), which it would not without positions."""
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + [f"model.positional={positional}", "model.dropout=0.0"])
    model = ablate.build_model(cfg).eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    assert torch.equal(model.src_input(ids), model.src_input.embedding(ids))
    swapped = torch.tensor([[6, 5, 7, 8]])
    with torch.no_grad():
        a, _ = model.encode(ids)
        b, _ = model.encode(swapped)
    assert not torch.allclose(a[0, 2:], b[0, 2:], atol=1e-5)


def test_t5_bias_per_layer_gives_every_layer_a_table_of_its_own():
    import ablate
    from tests.conftest import TINY

    shared = ablate.build_model(ablate.load_config(None, TINY + ["model.positional=t5_bias"]))
    own = ablate.build_model(ablate.load_config(None, TINY + ["model.positional=t5_bias_layer"]))
    tables = lambda m, stack: {id(layer.self_attn.positional.bias) for layer in getattr(m, stack).layers}  # noqa: E731
    assert len(tables(shared, "encoder")) == 1 and len(tables(own, "encoder")) == 2 == len(tables(own, "decoder"))
    n = ablate.count_parameters
    per_stack = 32 * 4  # buckets x heads
    assert n(own)["total"] - n(shared)["total"] == 2 * per_stack  # 2 layers a stack instead of 1 table a stack
    layer = own.decoder.layers[1].self_attn.positional
    assert not layer.bidirectional and own.encoder.layers[0].self_attn.positional.bidirectional
