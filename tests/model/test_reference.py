"""Reference tests of the assembled model against the paper and against PyTorch's own layers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ablate
from ablate import registry
from ablate.model.layers import EncoderLayer
from tests.conftest import TINY, skip_if_refused

REPO_CONFIGS = ablate.__path__[0].rsplit("/", 1)[0] + "/configs"


def paper_count(N: int, d: int, d_ff: int, h: int, d_k: int, d_v: int, V: int) -> int:
    """PAPER.md: A = 2(d h d_k + h d_k) + d h d_v + h d_v + h d_v d + d; F = 2 d d_ff + d_ff + d;
    total = N (3A + 2F + 10d) + V d."""
    A = 2 * (d * h * d_k + h * d_k) + d * h * d_v + h * d_v + h * d_v * d + d
    F = 2 * d * d_ff + d_ff + d
    return N * (3 * A + 2 * F + 10 * d) + V * d


BASE = dict(N=6, d=512, d_ff=2048, h=8, d_k=64, d_v=64, V=41000)
# Table 3 rows with a printed parameter count (x 10^6): (changes to base, printed).
TABLE_3 = [
    ({}, 65),
    ({"d_k": 16}, 58),
    ({"d_k": 32}, 60),
    ({"N": 2}, 36),
    ({"N": 4}, 50),
    ({"N": 8}, 80),
    ({"d": 256, "d_k": 32, "d_v": 32}, 28),
    ({"d": 1024, "d_k": 128, "d_v": 128}, 168),
    ({"d_ff": 1024}, 53),
    ({"d_ff": 4096}, 90),
]
KEYS = {"N": "model.n_layers", "d": "model.d_model", "d_ff": "model.d_ff", "h": "model.n_heads",
        "d_k": "model.d_k", "d_v": "model.d_v", "V": "data.vocab_size"}


@pytest.mark.parametrize("change,printed", TABLE_3, ids=[str(c or "base") for c, _ in TABLE_3])
def test_parameter_counts_match_table_3(change, printed):
    overrides = [f"{KEYS[k]}={v}" for k, v in change.items()] + ["data.vocab_size=41000"]
    cfg = ablate.load_config(f"{REPO_CONFIGS}/transformer_base.yaml", overrides)
    with torch.device("meta"):  # counts need no memory
        n = ablate.count_parameters(ablate.build_model(cfg))
    assert n["total"] == paper_count(**{**BASE, **change})
    assert round(n["total"] / 1e6) == printed
    assert sum(v for k, v in n.items() if k != "total") == n["total"]


def test_base_and_d_k_16_counts_exactly():
    """On real (CPU) tensors, as a user building the model would."""
    base = ablate.load_config(f"{REPO_CONFIGS}/transformer_base.yaml", ["data.vocab_size=41000"])
    assert ablate.count_parameters(ablate.build_model(base))["total"] == 65_130_496  # 65.13M
    row_b = ablate.load_config(f"{REPO_CONFIGS}/transformer_base.yaml", ["data.vocab_size=41000", "model.d_k=16"])
    assert ablate.count_parameters(ablate.build_model(row_b))["total"] == 58_038_784  # 58.04M


def _total(*overrides: str) -> int:
    cfg = ablate.load_config(None, ["data.vocab_size=1000", "model.n_layers=1", *overrides])
    with torch.device("meta"):
        return ablate.count_parameters(ablate.build_model(cfg))["total"]


def test_embedding_variants_add_the_matrices_they_untie():
    """V = 1000, d = 512: two_way adds the source's V x d matrix, untied adds two; ALBERT's factorisation
    replaces V x d by V x E + E x d."""
    tied = _total()
    assert _total("model.embedding=two_way") - tied == 1000 * 512
    assert _total("model.embedding=untied") - tied == 2 * 1000 * 512
    assert (_total("model.embedding=factorized", "model.embedding_args.d_embed=64") - tied
            == 1000 * 64 + 64 * 512 - 1000 * 512)


def _copy_into_torch_layer(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer) -> None:
    with torch.no_grad():
        theirs.self_attn.in_proj_weight.copy_(ours.self_attn.w_qkv.weight)
        theirs.self_attn.in_proj_bias.copy_(ours.self_attn.w_qkv.bias)
        theirs.self_attn.out_proj.weight.copy_(ours.self_attn.w_o.weight)
        theirs.self_attn.out_proj.bias.copy_(ours.self_attn.w_o.bias)
        theirs.linear1.load_state_dict(ours.ffn.w_1.state_dict())
        theirs.linear2.load_state_dict(ours.ffn.w_2.state_dict())
        theirs.norm1.load_state_dict(ours.res_attn.norm.state_dict())
        theirs.norm2.load_state_dict(ours.res_ffn.norm.state_dict())


@pytest.mark.parametrize("position,norm_first", [("post", False), ("pre", True)])
def test_encoder_layer_equals_torch_transformer_encoder_layer(position, norm_first):
    cfg = ablate.load_config(None, ["model.d_model=32", "model.n_heads=4", "model.d_ff=64",
                                    f"model.norm_position={position}"])
    ours = ablate.build_model(cfg).encoder.layers[0].eval()
    theirs = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    # Make the norms non-trivial so a swapped norm would show.
    for norm in (ours.res_attn.norm, ours.res_ffn.norm):
        nn.init.normal_(norm.weight)
        nn.init.normal_(norm.bias)
    _copy_into_torch_layer(ours, theirs)
    x = torch.randn(2, 6, 32)
    real = torch.ones(2, 6, dtype=torch.bool)
    real[1, 4:] = False  # padding on the second sequence
    with torch.no_grad():
        expected = theirs(x, src_key_padding_mask=~real)  # torch: True = ignore
        got = ours(x, real[:, None, None, :])  # ours: True = may attend
    assert torch.allclose(got[real], expected[real], atol=1e-5)


def _tiny(*extra: str) -> nn.Module:
    torch.manual_seed(0)
    return ablate.build_model(ablate.load_config(None, TINY + ["model.dropout=0.0", *extra])).eval()


MODEL_VARIANTS = [(k.name, n) for k in registry.kinds().values() if k.section == "model"
                  for n in registry.names(k.name)]
CAUSAL = [(k, n) for k, n in MODEL_VARIANTS if k != "mask" or not registry.create("mask", n, {}).looks_ahead]


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
@pytest.mark.parametrize("kind,name", CAUSAL, ids=[f"{k}={n}" for k, n in CAUSAL])
def test_a_later_target_token_never_changes_an_earlier_output(kind, name, arch):
    """Generated from the registry: under every variant of every part (but the masks that declare they look ahead),
    changing target token 4 leaves the outputs at positions 0-3 unchanged and changes some later one."""
    skip_if_refused(kind, name, arch)
    model = _tiny(f"model.{kind}={name}", f"model.arch={arch}")
    src, tgt = torch.randint(3, 24, (2, 7)), torch.randint(3, 24, (2, 8))
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 3) % 21 + 3
    with torch.no_grad():
        a, b = (model(src, tgt), model(src, changed)) if arch == "encoder_decoder" else (model(tgt), model(changed))
    torch.testing.assert_close(a[:, :4], b[:, :4], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_without_the_mask_future_tokens_leak_into_earlier_outputs():
    model = _tiny("model.mask=none")
    src, tgt = torch.randint(3, 24, (2, 7)), torch.randint(3, 24, (2, 6))
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 3) % 21 + 3
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    assert not torch.allclose(a[:, :4], b[:, :4], atol=1e-6)


def _noise_at_padding(ids: torch.Tensor):
    """A forward hook that replaces the input vectors at padded positions of ``ids`` with noise."""

    def hook(module, args, output):
        pad = (args[0] == 0).unsqueeze(-1)  # (B, T, 1)
        return torch.where(pad, torch.randn_like(output) * 10, output)

    return hook


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
@pytest.mark.parametrize("kind,name", MODEL_VARIANTS, ids=[f"{k}={n}" for k, n in MODEL_VARIANTS])
def test_changing_a_padded_position_changes_no_real_output(kind, name, arch):
    """Generated from the registry: whatever a padded position holds reaches no real position's output, under every
    variant of every part (the mask variant itself, or no mask at all: padding is hidden either way)."""
    skip_if_refused(kind, name, arch)
    model = _tiny(f"model.arch={arch}", f"model.{kind}={name}" if kind == "mask" else "model.mask=none",
                  *([] if kind == "mask" else [f"model.{kind}={name}"]))
    src, tgt = torch.randint(3, 24, (2, 7)), torch.randint(3, 24, (2, 6))
    src[0, 5:] = 0
    tgt[1, 4:] = 0
    real = tgt != 0

    def run() -> torch.Tensor:
        with torch.no_grad():
            return model(src, tgt) if arch == "encoder_decoder" else model(tgt)

    before = run()
    inputs = [model.tgt_input] + ([model.src_input] if arch == "encoder_decoder" else [])
    handles = [m.register_forward_hook(_noise_at_padding(None)) for m in inputs]
    after = run()
    for h in handles:
        h.remove()
    assert torch.allclose(before[real], after[real], atol=1e-5)
    assert not torch.allclose(before[~real], after[~real])  # the noise did reach the padded rows
