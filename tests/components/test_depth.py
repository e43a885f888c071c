"""Residuals, depth and per-layer structure against their papers, by hand on tiny cases: ReZero with a norm,
LayerScale, Fixup's initialisation, sharing only one stack, the Universal Transformer's adaptive computation time
(against a loop written from Graves's and tensor2tensor's equations), local and global layers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ablate
from ablate.components.auxiliary import collect_aux_losses
from ablate.components.residual import Fixup, LayerScale, ReZeroNorm
from ablate.components.universal import HaltingStack
from ablate.errors import ConfigError
from tests.conftest import TINY


def test_rezero_with_a_norm_is_x_plus_alpha_f_of_norm_x_and_starts_as_the_identity():
    norm = nn.RMSNorm(8)
    res = ReZeroNorm(norm=norm, dropout=0.0)
    x = torch.randn(2, 3, 8)
    assert torch.equal(res(x, torch.tanh), x)  # alpha = 0
    res.alpha.data.fill_(0.3)
    assert torch.allclose(res(x, torch.tanh), x + 0.3 * torch.tanh(norm(x)))
    for norm_name, cls in (("layernorm", nn.LayerNorm), ("rmsnorm", nn.RMSNorm)):  # composed with model.norm
        model = ablate.build_model(ablate.load_config(None, TINY + ["model.norm_position=rezero_norm",
                                                                   f"model.norm={norm_name}"]))
        assert isinstance(model.encoder.layers[0].res_attn.norm, cls) and isinstance(model.encoder.final_norm, cls)


def test_layerscale_scales_each_channel_from_its_init():
    res = LayerScale(norm=nn.LayerNorm(4), dropout=0.0, d_model=4, init=0.1)
    x = torch.randn(2, 3, 4)
    assert torch.allclose(res(x, torch.sin), x + 0.1 * torch.sin(nn.functional.layer_norm(x, (4,))))
    res.gamma.data = torch.tensor([1.0, 0.0, 2.0, -1.0])
    assert torch.allclose(res(x, torch.sin), x + torch.tensor([1.0, 0.0, 2.0, -1.0]) * res.norm(x).sin())
    with pytest.raises(ConfigError, match="norm_position_args.init"):
        LayerScale(norm=nn.LayerNorm(4), dropout=0.0, d_model=4, init=0.0)


def test_fixup_zeroes_each_branch_output_and_scales_the_rest_by_l_to_the_minus_half():
    """Zhang et al. 2019: the last layer of each residual branch is 0 at init, the others scaled by L^(-1/(2m-2)),
    m = 2; no norm anywhere, so at initialisation every layer is the identity."""
    torch.manual_seed(0)
    cfg = ablate.load_config(None, TINY + ["model.norm_position=fixup", "model.dropout=0.0"])
    torch.manual_seed(0)
    fixup = ablate.build_model(cfg).eval()
    torch.manual_seed(0)
    post = ablate.build_model(ablate.load_config(None, TINY + ["model.dropout=0.0"])).eval()
    L = 2 * 2 + 3 * 2  # 2 encoder layers with 2 branches, 2 decoder layers with 3
    assert fixup.encoder.layers[0].res_attn.gain == pytest.approx(L ** -0.5)
    for f_layer, p_layer in zip(fixup.encoder.layers, post.encoder.layers):
        assert torch.equal(f_layer.self_attn.w_o.weight, torch.zeros_like(f_layer.self_attn.w_o.weight))
        assert torch.equal(f_layer.ffn.w_2.weight, torch.zeros_like(f_layer.ffn.w_2.weight))
        assert torch.allclose(f_layer.ffn.w_1.weight, p_layer.ffn.w_1.weight * L ** -0.5)
        d = 32
        v_rows = slice(2 * d, 3 * d)  # W^Q, W^K, W^V fused: values come last, queries and keys keep their scale
        assert torch.allclose(f_layer.self_attn.w_qkv.weight[v_rows],
                              p_layer.self_attn.w_qkv.weight[v_rows] * L ** -0.5)
        assert torch.equal(f_layer.self_attn.w_qkv.weight[:2 * d], p_layer.self_attn.w_qkv.weight[:2 * d])
    x = torch.randn(2, 5, 32)
    assert torch.equal(fixup.encoder.layers[0](x, None), x)
    assert not any(isinstance(m, (nn.LayerNorm, nn.RMSNorm)) for m in fixup.modules())
    res = Fixup(dropout=0.0, n_encoder_layers=1, n_decoder_layers=1, decoder_only=False)
    res.bias.data.fill_(0.5)
    res.scale.data.fill_(2.0)
    assert torch.allclose(res(x, torch.tanh), x + 2.0 * torch.tanh(x + 0.5))


@pytest.mark.parametrize("sharing,encoder_distinct,decoder_distinct", [("encoder", 1, 2), ("decoder", 2, 1),
                                                                         ("all", 1, 1), ("none", 2, 2)])
def test_sharing_one_stack_shares_only_its_layers(sharing, encoder_distinct, decoder_distinct):
    model = ablate.build_model(ablate.load_config(None, TINY + [f"model.sharing={sharing}"]))
    assert len({id(m) for m in model.encoder.layers}) == encoder_distinct
    assert len({id(m) for m in model.decoder.layers}) == decoder_distinct
    assert len(model.encoder.layers) == len(model.decoder.layers) == 2


def act_by_hand(layer, halting_w, bias, timing, x, threshold):
    """Adaptive computation time, position by position, as tensor2tensor's ut_act writes it (Dehghani et al. 2019,
    appendix): loops and scalars, no vectorised code from ablate."""
    B, T, _ = x.shape
    N = timing.size(0)
    states = [x]
    for t in range(N):  # every step runs for the whole sequence (a halted position keeps serving as context)
        s = states[-1] + timing[t]
        states.append(s)  # input to the layer at step t, after the timing signal
        states[-1] = layer(s)
    out = torch.zeros_like(x)
    ponder = torch.zeros(B, T)
    for b in range(B):
        for i in range(T):
            total, remainder, updates, acc, done = 0.0, 0.0, 0, torch.zeros(x.size(-1)), False
            for t in range(N):
                p = torch.sigmoid((states[t][b, i] + timing[t]) @ halting_w + bias).item()  # on the step's input
                if done:
                    w = 0.0
                elif total + p > threshold or t == N - 1:
                    remainder = 1 - total
                    w, updates, done = remainder, updates + 1, True
                else:
                    total, w, updates = total + p, p, updates + 1
                acc = states[t + 1][b, i] * w + acc * (1 - w)
            out[b, i], ponder[b, i] = acc, updates + remainder
    return out, ponder.mean()


def test_adaptive_computation_time_equals_the_equations_by_hand():
    torch.manual_seed(0)
    d, N = 6, 4
    layer = nn.Sequential(nn.Linear(d, d), nn.Tanh())
    stack = HaltingStack([lambda_layer(layer)] * N, nn.Identity(), d_model=d, threshold=0.9, ponder_weight=0.5,
                         halting_bias=0.3)
    nn.init.normal_(stack.halting.weight, std=1.0)
    x = torch.randn(2, 5, d)
    with collect_aux_losses() as aux:
        out = stack(x)
    expected, ponder = act_by_hand(layer, stack.halting.weight[0], 0.3, stack.timing, x, 0.9)
    assert torch.allclose(out, expected, atol=1e-6)
    (term,) = aux
    assert term.name == "ponder" and term.weight == 0.5 and term.value.item() == pytest.approx(ponder.item(), abs=1e-6)
    assert 1.0 <= ponder.item() <= N + 1


class lambda_layer(nn.Module):
    """A layer with a stack layer's signature (x, *args, cache=None) around a plain module."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x, *args, cache=None):
        return self.inner(x)


def test_the_universal_transformer_shares_one_layer_and_its_ponder_cost_is_an_auxiliary_loss():
    cfg = ablate.load_config(None, TINY + ["model.sharing=universal", "model.n_layers=3", "model.dropout=0.0"])
    model = ablate.build_model(cfg)
    assert len(model.decoder.layers) == 3 and len({id(m) for m in model.decoder.layers}) == 1
    src, tgt = torch.randint(3, 24, (2, 6)), torch.randint(3, 24, (2, 5))
    with collect_aux_losses() as aux:
        model(src, tgt)
    assert [t.name for t in aux] == ["ponder", "ponder"]  # the encoder's and the decoder's
    assert all(1.0 <= t.value.item() <= 4.0 and t.weight == 0.01 for t in aux)
    with pytest.raises(ConfigError, match="sharing_args.threshold"):
        ablate.build_model(ablate.load_config(None, TINY + ["model.sharing=universal",
                                                           "model.sharing_args.threshold=1.5"]))


def test_local_global_interleaves_windows_and_causal_layers_at_its_ratio():
    from ablate.components.masks import CausalMask, LocalGlobalMask, SlidingWindowMask
    from ablate.model.transformer import LayerMasks

    mask = LocalGlobalMask(window=2, local_per_global=2)
    kinds = [type(m) for m in mask.layers(6)]
    assert kinds == [SlidingWindowMask, SlidingWindowMask, CausalMask] * 2
    assert torch.equal(mask(4, 4, torch.device("cpu")), CausalMask()(4, 4, torch.device("cpu")))
    cfg = ablate.load_config(None, TINY + ["model.mask=local_global", "model.mask_args.window=2",
                                           "model.arch=decoder_only", "model.dropout=0.0", "model.n_layers=2"])
    model = ablate.build_model(cfg).eval()
    ids = torch.randint(3, 24, (1, 8))
    with torch.no_grad():
        base = model(ids)
        changed = ids.clone()
        changed[0, 0] = 3 if ids[0, 0] != 3 else 4
        after = model(changed)
    # two layers: local (window 2) then global: position 7 still sees token 0 through the global layer
    assert not torch.allclose(base[0, 7], after[0, 7])
    model.layer_masks = LayerMasks(SlidingWindowMask(window=2), 2)  # both local: token 0 is out of reach of 7
    with torch.no_grad():
        assert torch.allclose(model(ids)[0, 7], model(changed)[0, 7])


def test_fixup_zeroes_a_mixtures_experts_not_its_router():
    model = ablate.build_model(ablate.load_config(None, TINY + ["model.norm_position=fixup", "model.ffn=switch"]))
    ffn = model.encoder.layers[0].ffn
    assert torch.equal(ffn.w_2, torch.zeros_like(ffn.w_2)) and ffn.router.weight.abs().sum() > 0
