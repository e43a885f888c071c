"""Mixture-of-experts feed-forwards against brute force: each token through its top-k experts one at a time, the
capacity's queue walked by hand, the load-balancing loss of Fedus et al. (2022, eq. 4) and the router z-loss of Zoph
et al. (2022) written out, the parameter count against its formula, and the auxiliary loss in the training objective
but not in val/loss."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

import ablate
from ablate import registry
from ablate.components.auxiliary import collect_aux_losses
from ablate.components.moe import MixtureOfExperts
from ablate.errors import ConfigError
from ablate.train.system import TransformerSystem
from tests.conftest import TINY

D_MODEL, D_FF = 6, 10


def _moe(name: str = "moe", **args) -> MixtureOfExperts:
    torch.manual_seed(0)
    moe = registry.create("ffn", name, {"d_model": D_MODEL, "d_ff": D_FF}, args)
    with torch.no_grad():
        for p in moe.parameters():  # biases nonzero too, so a missing term would show
            p.copy_(torch.randn_like(p))
    return moe


def _x(B: int = 3, T: int = 5) -> torch.Tensor:
    return torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(1))  # (B, T, d_model)


def _expert(moe: MixtureOfExperts, e: int, x: torch.Tensor) -> torch.Tensor:
    """FFN_e(x) = max(0, x W1_e + b1_e) W2_e + b2_e for one token x (d_model,)."""
    return torch.relu(x @ moe.w_1[e] + moe.b_1[e]) @ moe.w_2[e] + moe.b_2[e]


def _routes(moe: MixtureOfExperts, x: torch.Tensor, renormalise: bool) -> list[list[tuple[int, torch.Tensor]]]:
    """For each token of the flattened batch, its k (expert, gate) choices, best first."""
    routes = []
    for token in x.reshape(-1, D_MODEL):
        p = torch.softmax(moe.router.weight @ token, dim=0)  # (E,)
        top = p.topk(moe.k)
        gates = top.values / top.values.sum() if renormalise else top.values
        routes.append(list(zip(top.indices.tolist(), gates)))
    return routes


def _brute_force(moe: MixtureOfExperts, x: torch.Tensor, capacity: int | None, renormalise: bool) -> torch.Tensor:
    """y_n = sum of g FFN_e(x_n) over token n's choices that found a slot: every token's first choice queues before
    any second choice, tokens in batch order; an expert takes ``capacity`` of them (None: all)."""
    tokens, routes = x.reshape(-1, D_MODEL), _routes(moe, x, renormalise)
    y, taken = torch.zeros_like(tokens), [0] * moe.n_experts
    for rank in range(moe.k):
        for n, token in enumerate(tokens):
            e, g = routes[n][rank]
            taken[e] += 1
            if capacity is None or taken[e] <= capacity:
                y[n] += g * _expert(moe, e, token)
    return y.view_as(x)


@pytest.mark.parametrize("name,args,renormalise", [("moe", {"n_experts": 4, "k": 2}, True),
                                                   ("moe", {"n_experts": 5, "k": 3}, True),
                                                   ("switch", {"n_experts": 4}, False)])
def test_without_a_capacity_limit_each_token_gets_its_top_k_experts_weighted_by_the_gates(name, args, renormalise):
    """Eval mode (no limit), and training with a capacity of every token (capacity_factor E / k)."""
    x = _x()
    moe = _moe(name, **args).eval()
    expected = _brute_force(moe, x, None, renormalise)
    torch.testing.assert_close(moe(x), expected, rtol=1e-5, atol=1e-5)
    roomy = _moe(name, **args, capacity_factor=float(moe.n_experts) / moe.k).train()
    assert roomy.capacity(15) == 15
    torch.testing.assert_close(roomy(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,args,renormalise", [("moe", {"n_experts": 4, "k": 2, "capacity_factor": 0.5}, True),
                                                   ("switch", {"n_experts": 4, "capacity_factor": 0.6}, False)])
def test_with_a_small_capacity_exactly_the_tokens_past_it_get_nothing_from_that_expert(name, args, renormalise):
    x = _x()
    moe = _moe(name, **args).train()
    C = moe.capacity(15)
    assert C == math.ceil(args["capacity_factor"] * moe.k * 15 / moe.n_experts)
    expected = _brute_force(moe, x, C, renormalise)
    assert not torch.allclose(expected, _brute_force(moe, x, None, renormalise))  # some tokens were dropped
    torch.testing.assert_close(moe(x), expected, rtol=1e-5, atol=1e-5)


def test_switch_drops_the_tokens_past_capacity_and_keeps_the_first_ones():
    """Every token prefers expert 0: C = ceil(1.25 * 1 * 6 / 2) = 4 keep p_0 FFN_0(x), the last two get exactly 0."""
    moe = _moe("switch", n_experts=2).train()
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0, 0] = 5.0
    x = _x(1, 6)
    x[..., 0] = x[..., 0].abs() + 0.1  # (1, 6, d): a positive first feature, so expert 0 wins
    y = moe(x)  # (1, 6, d)
    assert moe.capacity(6) == 4
    for t in range(4):
        p0 = torch.softmax(moe.router.weight @ x[0, t], 0)[0]
        torch.testing.assert_close(y[0, t], p0 * _expert(moe, 0, x[0, t]), rtol=1e-5, atol=1e-6)
    assert torch.equal(y[0, 4:], torch.zeros(2, D_MODEL))


def test_the_load_balancing_loss_and_z_loss_are_the_papers_formulas():
    """Fedus et al. 2022, eq. 4: E sum_i f_i P_i, f_i the fraction of tokens whose first choice is i, P_i the mean of
    p_i over tokens; Zoph et al. 2022: the mean over tokens of logsumexp(router logits)^2."""
    moe, x = _moe("moe", n_experts=4, k=2, balance_weight=0.3, z_weight=0.02).train(), _x()
    with collect_aux_losses() as terms:
        moe(x)
    by_name = {t.name: t for t in terms}
    assert sorted(by_name) == ["load_balance", "router_z"]
    assert (by_name["load_balance"].weight, by_name["router_z"].weight) == (0.3, 0.02)
    E, tokens = 4, x.reshape(-1, D_MODEL)
    f, P, z = [0.0] * E, [0.0] * E, 0.0
    for token in tokens.tolist():
        logits = [sum(w * t for w, t in zip(row, token)) for row in moe.router.weight.tolist()]  # (E,)
        p = [math.exp(z) / sum(math.exp(m) for m in logits) for z in logits]
        f[p.index(max(p))] += 1 / len(tokens)
        for i in range(E):
            P[i] += p[i] / len(tokens)
        z += math.log(sum(math.exp(m) for m in logits)) ** 2 / len(tokens)
    assert by_name["load_balance"].value.item() == pytest.approx(E * sum(f[i] * P[i] for i in range(E)), rel=1e-5)
    assert by_name["router_z"].value.item() == pytest.approx(z, rel=1e-5)


def test_uniform_routing_gives_a_balance_loss_of_one_and_collapse_gives_e():
    moe, x = _moe("switch", n_experts=4).train(), _x()
    with torch.no_grad():
        moe.router.weight.zero_()  # p_i = 1/E for every token
    with collect_aux_losses() as terms:
        moe(x)
    assert terms[0].value.item() == pytest.approx(1.0)
    with torch.no_grad():
        moe.router.weight[0, 0] = 1e4  # every token to expert 0, p_0 = 1 (x's first feature made positive)
    x[..., 0] = x[..., 0].abs() + 0.1
    with collect_aux_losses() as terms:
        moe(x)
    assert terms[0].value.item() == pytest.approx(4.0)


def test_the_parameter_count_is_e_experts_plus_the_router():
    """E (2 d_model d_ff + d_ff + d_model) for the experts' W1, b1, W2, b2, plus d_model E for the router (no bias)."""
    for name, E in (("moe", 8), ("switch", 8), ("moe", 3)):
        moe = registry.create("ffn", name, {"d_model": D_MODEL, "d_ff": D_FF}, {"n_experts": E} if E != 8 else {})
        assert sum(p.numel() for p in moe.parameters()) == E * (2 * D_MODEL * D_FF + D_FF + D_MODEL) + D_MODEL * E


def test_switch_is_top_1_and_its_router_learns_from_the_token_loss():
    """Gate p_i(x), not renormalised (which would be 1): the router's gradient from the output is not zero."""
    moe = _moe("switch")
    assert moe.k == 1 and moe.capacity_factor == 1.25 and moe.n_experts == 8
    moe(_x()).sum().backward()
    assert moe.router.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("args,key", [({"k": 9}, "k"), ({"k": 0}, "k"), ({"n_experts": 0}, "n_experts"),
                                      ({"capacity_factor": 0.0}, "capacity_factor"),
                                      ({"balance_weight": -1.0}, "balance_weight")])
def test_bad_arguments_name_their_key(args, key):
    with pytest.raises(ConfigError, match=f"model.ffn_args.{key}"):
        registry.create("ffn", "moe", {"d_model": D_MODEL, "d_ff": D_FF}, args)


def _system() -> TransformerSystem:
    cfg = ablate.load_config(None, TINY + ["model.ffn=switch", "model.dropout=0.0"])
    torch.manual_seed(0)
    return TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    tgt = torch.randint(3, 24, (4, 10), generator=g)
    return {"src_ids": torch.randint(3, 24, (4, 9), generator=g), "tgt_ids": tgt, "labels": tgt.roll(-1, 1)}


@pytest.mark.filterwarnings("ignore::UserWarning")  # self.log outside a Trainer
def test_the_balance_loss_joins_the_training_objective_but_not_val_loss():
    system, batch = _system().train(), _batch()
    token_loss, _, _, terms = system._token_losses(batch, system.cfg.train.label_smoothing)
    balance = [t.value for t in terms if t.name == "load_balance"]
    assert len(balance) == 4  # one per FFN: 2 encoder and 2 decoder layers
    assert all(t.weight == 0.01 for t in terms if t.name == "load_balance")
    objective = system.training_step(batch, 0)
    torch.testing.assert_close(objective, token_loss + 0.01 * sum(balance))
    assert objective > token_loss

    system.eval()
    with torch.no_grad():
        val_loss = system._token_losses(batch, 0.0)[0]
        system.validation_step(batch, 0)
        logits = system(batch)  # (B, T, V)
    labels = system.scored_labels(batch["labels"])
    plain = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=system.pad_id)
    torch.testing.assert_close(val_loss, plain)
    torch.testing.assert_close(system.val_nll.compute(), plain)  # what val/loss logs
