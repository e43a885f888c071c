"""Embedding variants against their papers on tiny cases: ALBERT's factorisation untied, the adaptive softmax (Grave
et al. 2017), adaptive inputs tied with it (Baevski & Auli 2019), and the mixture of softmaxes (Yang et al. 2018)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ablate
from ablate.components.adaptive import adaptive_input, adaptive_softmax, parse_cutoffs
from ablate.components.embedding import factorized_untied, tied
from ablate.components.mixture_softmax import mos
from ablate.errors import ConfigError
from tests.conftest import TINY

V, D = 24, 32


def _distinct(*modules: nn.Module) -> int:
    """Parameters of the modules together, each tensor once."""
    return sum(p.numel() for p in {id(p): p for m in modules for p in m.parameters()}.values())


# ---- factorized_untied (Lan et al. 2020's factorisation, nothing shared) ----------------------------------------

def test_factorized_untied_has_three_tables_and_projections_and_computes_x_pt_et():
    torch.manual_seed(0)
    d_embed = 5
    emb = factorized_untied(vocab_size=V, d_model=D, d_embed=d_embed)
    parts = (emb.source, emb.target, emb.generator.embedding)
    assert len({id(p.table.weight) for p in parts}) == 3 and len({id(p.projection.weight) for p in parts}) == 3
    assert _distinct(emb.source, emb.target, emb.generator) == 3 * (V * d_embed + d_embed * D)
    x = torch.randn(2, 3, D)
    E = emb.generator.embedding.table.weight  # (V, d_embed)
    P = emb.generator.embedding.projection.weight.T  # (d_embed, d_model): ALBERT's projection up
    assert torch.allclose(emb.generator(x), x @ P.T @ E.T, atol=1e-6)
    ids = torch.tensor([[1, 7, 23]])
    E_s, P_s = emb.source.table.weight, emb.source.projection.weight.T
    assert torch.allclose(emb.source(ids), E_s[ids] * math.sqrt(d_embed) @ P_s, atol=1e-6)  # as `factorized` scales


def test_factorized_untied_model_holds_three_separate_parts():
    model = ablate.build_model(ablate.load_config(None, TINY + ["model.embedding=factorized_untied"]))
    src, tgt, gen = model.src_input.embedding, model.tgt_input.embedding, model.generator
    assert src is not tgt and gen.embedding is not tgt and gen.embedding is not src
    assert ablate.count_parameters(model)["generator"] == V * 128 + 128 * D  # its own table and projection


# ---- adaptive_softmax (Grave et al. 2017) -----------------------------------------------------------------------

def test_cutoffs_are_fractions_of_v_or_token_ids():
    assert parse_cutoffs("0.25,0.5", 24) == [6, 12]
    assert parse_cutoffs("20000,60000", 267735) == [20000, 60000]
    assert parse_cutoffs("0.1, 5000", 10000) == [1000, 5000]


@pytest.mark.parametrize("bad", ["0.5,0.25", "0.25,0.25", "24", "30", "0", "-0.1", "2.5", "abc", "", "nan", "0.01"])
def test_bad_cutoffs_are_refused_naming_the_key(bad):
    with pytest.raises(ConfigError, match=r"model\.embedding_args\.cutoffs"):
        adaptive_softmax(vocab_size=V, d_model=D, cutoffs=bad)
    with pytest.raises(ConfigError, match=r"model\.embedding_args\.cutoffs"):
        adaptive_input(vocab_size=V, d_model=D, cutoffs=bad)


def test_a_div_value_that_leaves_a_cluster_no_dimension_is_refused():
    with pytest.raises(ConfigError, match=r"model\.embedding_args\.div_value"):
        adaptive_input(vocab_size=V, d_model=D, div_value=8.0)  # 32 / 64 < 1
    with pytest.raises(ConfigError, match=r"model\.embedding_args\.div_value"):
        adaptive_softmax(vocab_size=V, d_model=D, div_value=0.5)


def test_adaptive_softmax_is_torchs_and_the_papers_factorisation():
    """log p(w) = log softmax(x W_h)[w] in the head; log softmax(x W_h)[head + i] + log softmax(x U_i W_i)[w - c_i]
    in tail cluster i (Grave et al. 2017, section 4), U_i down to d_model / 4^(i+1)."""
    torch.manual_seed(0)
    emb = adaptive_softmax(vocab_size=V, d_model=D)
    x = torch.randn(2, 3, D)
    log_p = emb.generator(x)
    assert log_p.shape == (2, 3, V)
    reference = nn.AdaptiveLogSoftmaxWithLoss(D, V, [6, 12], div_value=4.0)
    reference.load_state_dict(emb.generator.softmax.state_dict())
    assert torch.allclose(log_p, reference.log_prob(x.reshape(-1, D)).view(2, 3, V))
    assert torch.allclose(log_p.exp().sum(-1), torch.ones(2, 3))
    s = emb.generator.softmax
    head = F.log_softmax(x @ s.head.weight.T, -1)  # (2, 3, 6 + 2)
    assert [tuple(t[0].weight.shape) for t in s.tail] == [(8, D), (2, D)]
    by_hand = [head[..., :6]] + [head[..., 6 + i:7 + i] + F.log_softmax(x @ t[0].weight.T @ t[1].weight.T, -1)
                                 for i, t in enumerate(s.tail)]
    assert torch.allclose(log_p, torch.cat(by_hand, -1), atol=1e-6)
    target = torch.randint(0, V, (6,))  # the loss torch's module computes is the cross-entropy of these logits
    assert torch.allclose(reference(x.reshape(-1, D), target).loss, F.cross_entropy(log_p.reshape(-1, V), target))


def test_adaptive_softmax_keeps_two_separate_input_tables():
    emb = adaptive_softmax(vocab_size=V, d_model=D)
    assert emb.source is not emb.target
    head, tails = (6 + 2) * D, (D * 8 + 8 * 6) + (D * 2 + 2 * 12)
    assert _distinct(emb.source, emb.target, emb.generator) == 2 * V * D + head + tails


# ---- adaptive_input (Baevski & Auli 2019) -----------------------------------------------------------------------

@pytest.mark.parametrize("scale", [True, False])
def test_adaptive_input_embeds_cluster_i_as_its_table_row_times_its_projection(scale):
    torch.manual_seed(0)
    emb = adaptive_input(vocab_size=V, d_model=D, scale=scale)
    a = emb.source
    assert emb.target is a and emb.generator.embedding is a  # shared three ways
    assert [t.weight.shape for t in a.tables] == [(6, 32), (6, 8), (12, 2)]  # d_model / 4^i
    ids = torch.tensor([[0, 5, 6, 11, 12, 23]])
    out = a(ids)
    multiplier = math.sqrt(D) if scale else 1.0
    for j, w in enumerate(ids[0].tolist()):
        i, c = (0, 0) if w < 6 else (1, 6) if w < 12 else (2, 12)
        P = a.projections[i].weight.T  # (d_i, d_model)
        assert torch.allclose(out[0, j], a.tables[i].weight[w - c] @ P * multiplier, atol=1e-6)


def test_adaptive_input_parameter_count_by_hand():
    emb = adaptive_input(vocab_size=V, d_model=D)
    tables = 6 * 32 + 6 * 8 + 12 * 2
    projections = 32 * 32 + 8 * 32 + 2 * 32
    assert _distinct(emb.source, emb.target, emb.generator) == tables + projections + 2 * D  # + the 2 cluster logits


def test_adaptive_input_tied_softmax_is_normalised_and_the_hand_computation():
    """Cluster i's scores are (x P_i^T) E_i^T; the head scores cluster 0's words and one logit per tail cluster."""
    torch.manual_seed(0)
    emb = adaptive_input(vocab_size=V, d_model=D)
    gen = emb.generator.double()
    x = torch.randn(2, 3, D, dtype=torch.float64)
    log_p = gen(x)
    assert log_p.shape == (2, 3, V)
    assert torch.allclose(log_p.exp().sum(-1), torch.ones(2, 3, dtype=torch.float64))
    a = gen.embedding
    scores = [x @ P.weight @ E.weight.T for E, P in zip(a.tables, a.projections)]  # (2, 3, V_i)
    head = torch.cat([scores[0], x @ gen.cluster_logits.weight.T], -1)
    z_head = head.exp().sum(-1, keepdim=True)
    expected = torch.empty(2, 3, V, dtype=torch.float64)
    for w in range(V):  # one word at a time
        if w < 6:
            expected[..., w] = (head[..., w].exp() / z_head[..., 0]).log()
        else:
            i, c = (1, 6) if w < 12 else (2, 12)
            p_cluster = head[..., 6 + i - 1].exp() / z_head[..., 0]
            p_word = scores[i][..., w - c].exp() / scores[i].exp().sum(-1)
            expected[..., w] = (p_cluster * p_word).log()
    assert torch.allclose(log_p, expected, atol=1e-10)


# ---- mos (Yang et al. 2018) -------------------------------------------------------------------------------------

def test_mos_equals_a_loop_over_the_k_softmaxes():
    """p = sum_k pi_k softmax(h_k E^T), pi = softmax(x W_pi), h_k = tanh(x W_k), in float64, one component at a time."""
    torch.manual_seed(0)
    K = 3
    emb = mos(vocab_size=V, d_model=D, n_components=K)
    gen = emb.generator.double()
    assert emb.source is emb.target and gen.embedding is emb.target  # tied three ways
    x = torch.randn(2, 3, D, dtype=torch.float64)
    log_p = gen(x)
    E, W_pi, W = gen.embedding.weight, gen.prior.weight, gen.context.weight  # (V, D), (K, D), (K D, D)
    pi = torch.softmax(x @ W_pi.T, -1)  # (2, 3, K)
    p = torch.zeros(2, 3, V, dtype=torch.float64)
    for k in range(K):
        h_k = torch.tanh(x @ W[k * D:(k + 1) * D].T)  # (2, 3, D)
        p += pi[..., k:k + 1] * torch.softmax(h_k @ E.T, -1)
    assert torch.allclose(log_p, p.log(), atol=1e-12)
    assert torch.allclose(log_p.exp().sum(-1), torch.ones(2, 3, dtype=torch.float64))
    assert _distinct(emb.source, emb.target, emb.generator) == V * D + D * K + K * D * D


def test_mos_breaks_the_softmax_bottleneck():
    """Over N contexts, a softmax's log-probabilities x E^T - log Z have rank <= d_model + 1; a mixture's exceed it."""
    torch.manual_seed(0)
    d = 4
    x = torch.randn(1, 24, d, dtype=torch.float64)
    single = tied(vocab_size=V, d_model=d).generator.double()
    mixture = mos(vocab_size=V, d_model=d, n_components=4).generator.double()
    with torch.no_grad():
        assert torch.linalg.matrix_rank(F.log_softmax(single(x)[0], -1)) <= d + 1
        assert torch.linalg.matrix_rank(mixture(x)[0]) > d + 1


def test_mos_refuses_no_components():
    with pytest.raises(ConfigError, match=r"model\.embedding_args\.n_components"):
        mos(vocab_size=V, d_model=D, n_components=0)


# ---- every variant trains ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
@pytest.mark.parametrize("name", ["factorized_untied", "adaptive_softmax", "adaptive_input", "mos"])
def test_a_model_with_the_variant_takes_an_optimiser_step(name, arch):
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + [f"model.embedding={name}", f"model.arch={arch}"])
    model = ablate.build_model(cfg)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    src, tgt = torch.randint(3, V, (4, 7)), torch.randint(3, V, (4, 6))

    def loss() -> torch.Tensor:
        logits = model(src, tgt[:, :-1]) if arch == "encoder_decoder" else model(tgt[:, :-1])
        return F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))

    before = [p.detach().clone() for p in model.parameters()]
    first = loss()
    first.backward()
    optimiser.step()
    assert torch.isfinite(first) and torch.isfinite(loss())
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
