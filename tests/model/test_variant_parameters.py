"""Parameter counts of the variants, each checked against a count worked out by hand from its paper.

Every case builds the TINY model (tests/conftest.py) with one variant swapped in and checks how many parameters
that adds to, or removes from, the default model with the same config. The expected change comes from the
variant's equations, written out from the dimensions below. It is never computed with ablate's counting code or
by summing the parameters of ablate's modules. The default model's own count is checked first, against the
formula the Vaswani et al. 2017 paper implies (as in test_reference.py).

Notation (Vaswani et al. 2017): d = d_model, h heads of d_k (queries, keys) and d_v (values), d_ff, vocabulary
V, N layers in each stack. ablate's convention, stated in its attention modules ("like every projection here")
and already assumed by test_reference.py's count of the base model, is that every projection matrix W has a bias
b. So a projection d_in -> d_out counts d_in d_out + d_out. Where a variant's paper writes a projection without a
bias (DeepSeek-V2's MLA, the gate W_theta of gated attention, DynamicConv's kernel predictor W^Q), the count
below follows the convention and says so at that term. Parameter-free maps (tanh, softmax) and buffers (RoPE
frequencies, sinusoids, a frozen random matrix) count 0.

Where ablate's variant departs from the authors' code on purpose (ReZero's alpha per connection, Fixup's one bias
per branch), the variant's description says so and the formula below counts what it says.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import pytest
import torch
from omegaconf import OmegaConf

import ablate
from tests.conftest import TINY

ED, DO = "encoder_decoder", "decoder_only"
TINY_VALUES = dict(o.split("=", 1) for o in TINY)


@dataclass(frozen=True)
class Dims:
    """TINY's dimensions for one architecture, and how many of each part that architecture has."""

    arch: str
    N: int = int(TINY_VALUES["model.n_layers"])  # 2 layers in each stack
    d: int = int(TINY_VALUES["model.d_model"])  # 32
    h: int = int(TINY_VALUES["model.n_heads"])  # 4
    d_ff: int = int(TINY_VALUES["model.d_ff"])  # 64
    V: int = int(TINY_VALUES["data.vocab_size"])  # 24

    @property
    def d_k(self) -> int:  # section 3.2.2: d_k = d_v = d_model / h (8)
        return self.d // self.h

    @property
    def d_v(self) -> int:
        return self.d // self.h

    @property
    def enc_dec(self) -> bool:
        return self.arch == ED

    @property
    def stacks(self) -> int:  # encoder and decoder; a decoder-only model has one stack
        return 2 if self.enc_dec else 1

    @property
    def layers(self) -> int:  # every layer of every stack
        return self.stacks * self.N

    @property
    def self_attn(self) -> int:  # one self-attention per layer
        return self.layers

    @property
    def cross_attn(self) -> int:  # one encoder-decoder attention per decoder layer of an encoder-decoder model
        return self.N if self.enc_dec else 0

    @property
    def attn(self) -> int:
        return self.self_attn + self.cross_attn

    @property
    def ffn(self) -> int:  # one FFN per layer
        return self.layers

    @property
    def residuals(self) -> int:  # one residual connection per sub-layer: 2N + 3N, or 2N decoder-only
        return self.attn + self.ffn

    # The paper's parts, biases included.
    @property
    def qkv(self) -> int:
        """W^Q, W^K (d x h d_k each) and W^V (d x h d_v), with their biases."""
        return self.d * self.h * (2 * self.d_k + self.d_v) + self.h * (2 * self.d_k + self.d_v)

    @property
    def A(self) -> int:
        """One multi-head attention: W^Q, W^K, W^V and W^O (h d_v x d), biases included."""
        return self.qkv + self.h * self.d_v * self.d + self.d

    @property
    def F(self) -> int:
        """One FFN, equation 2: W1 (d x d_ff) + b1 + W2 (d_ff x d) + b2."""
        return 2 * self.d * self.d_ff + self.d_ff + self.d

    @property
    def LN(self) -> int:
        """One LayerNorm over d: gain and bias."""
        return 2 * self.d

    @property
    def enc_layer(self) -> int:
        """An encoder layer (also a decoder-only model's layer): self-attention, FFN, and a LayerNorm for each."""
        return self.A + self.F + 2 * self.LN

    @property
    def dec_layer(self) -> int:
        """A decoder layer of an encoder-decoder model: two attentions, FFN, and three LayerNorms."""
        return 2 * self.A + self.F + 3 * self.LN

    @property
    def default_total(self) -> int:
        """The default model: N (3A + 2F + 10d) + V d (test_reference.py's paper_count), or N (A + F + 4d) + V d
        decoder-only. The sinusoids have no parameters; one V x d matrix is shared three ways (section 3.4)."""
        stacks = self.N * (self.enc_layer + self.dec_layer) if self.enc_dec else self.N * self.enc_layer
        return stacks + self.V * self.d


# --- expected changes, one function per variant: (dims, the variant's resolved *_args) -> change in parameters ---


def talking_heads(D: Dims, a: dict) -> int:
    # Shazeer et al. 2020, "Talking-Heads Attention": the h x h matrices P_l (logits) and P_w (weights), with no
    # bias. ablate puts them in every attention: self and encoder-decoder.
    return D.attn * (D.h * D.h + D.h * D.h)


def gated(D: Dims, a: dict) -> int:
    # Qiu et al. 2025: Y' = Y * sigmoid(X W_theta), a gate for each head and channel, W_theta: d -> h d_v. The
    # paper writes no bias; ablate's convention adds b_theta (h d_v). Used in self and cross-attention.
    return D.attn * (D.d * D.h * D.d_v + D.h * D.d_v)


def differential(D: Dims, a: dict) -> int:
    # Ye et al. 2024: lambda = exp(l_q1 . l_k1) - exp(l_q2 . l_k2) + lambda_init, with l_q1, l_k1, l_q2, l_k2 each
    # the width of a half head Q_1 (d_k / 2), one set per attention module. Then the head norm (RMSNorm over a
    # head's d_v, gain shared by the heads, as in the authors' code). The projections keep MHA's sizes.
    return D.attn * (4 * (D.d_k // 2) + D.d_v)


def mla(D: Dims, a: dict) -> int:
    # DeepSeek-V2, section 2.1: c_KV = W^DKV x (d -> d_c), then RMSNorm(d_c) (gain d_c, as in DeepSeek's code);
    # k = W^UK c_KV (d_c -> h d_k), v = W^UV c_KV (d_c -> h d_v); q = W^Q x, or q = W^UQ norm(W^DQ x) when
    # d_c' = d_q_latent > 0. These replace MHA's W^Q, W^K, W^V; W^O stays. DeepSeek's projections have no bias;
    # ablate's convention gives each one (the "+ out" terms).
    c, cq = a["d_latent"], a["d_q_latent"]
    norm = 1 if a["latent_norm"] else 0
    kv = (D.d * c + c) + norm * c + (c * D.h * D.d_k + D.h * D.d_k) + (c * D.h * D.d_v + D.h * D.d_v)
    if cq:
        q = (D.d * cq + cq) + norm * cq + (cq * D.h * D.d_k + D.h * D.d_k)
    else:
        q = D.d * D.h * D.d_k + D.h * D.d_k
    return D.attn * (q + kv - D.qkv)


def synthesizer_dense(D: Dims, a: dict) -> int:
    # Tay et al. 2021, section 3.1: B_i = W_2 relu(W_1 x_i + b_1) + b_2 for each head, with W_1: d -> d_k per
    # head (d x d in all, Table 1's d^2) and W_2: d_k -> l per head (d x l in all, Table 1's d l), b_2 of l per
    # head. l is the longest sequence, max_len. Y = softmax(B) G(X), with G = W^V. So W^Q and W^K (and their
    # biases) are gone. Self-attention only: the decoder's attention over the encoder stays dot-product.
    L = a["max_len"]
    w1 = D.d * D.h * D.d_k + D.h * D.d_k
    w2 = D.h * D.d_k * L + D.h * L
    return D.self_attn * (w1 + w2 - 2 * (D.d * D.h * D.d_k + D.h * D.d_k))


def synthesizer_random(D: Dims, a: dict) -> int:
    # Tay et al. 2021, section 3.2: a learned R (l x l) for each head ("each head adds l^2 parameters") in place of
    # W^Q and W^K; G = W^V and W^O stay. A fixed R is a buffer, not a parameter. Self-attention only.
    L = a["max_len"]
    r = 0 if a.get("fixed") else D.h * L * L
    return D.self_attn * (r - 2 * (D.d * D.h * D.d_k + D.h * D.d_k))


def lightconv(D: Dims, a: dict) -> int:
    # Wu et al. 2019, section 4: the input projection d -> 2d then GLU, a depthwise kernel of H = h groups x K
    # taps (W in R^{H x k}, no bias), and the output projection W^O: d -> d. These replace the self-attention
    # (A). The decoder's encoder-decoder attention stays.
    K, H = a["kernel_size"], D.h
    block = (D.d * 2 * D.d + 2 * D.d) + H * K + (D.d * D.d + D.d)
    return D.self_attn * (block - D.A)


def dynamicconv(D: Dims, a: dict) -> int:
    # Wu et al. 2019, section 3: LightConv with each position's kernels predicted, f(x_i) = W^Q x_i with
    # W^Q in R^{H x k x d}, in place of the static H x K kernel. The paper's f has no bias; ablate's convention
    # gives it one (H K).
    K, H = a["kernel_size"], D.h
    block = (D.d * 2 * D.d + 2 * D.d) + (D.d * H * K + H * K) + (D.d * D.d + D.d)
    return D.self_attn * (block - D.A)


def relative(D: Dims, a: dict) -> int:
    # Shaw et al. 2018: w^K_{-k..k}, 2k + 1 vectors of d_a = d_k, shared by the heads and learned in each layer's
    # self-attention (tensor2tensor). Only the key-side a^K: the value-side a^V that the paper's Table 3 found
    # unneeded is left out, as ablate documents. Nothing is added to the embeddings; sinusoids had 0 parameters.
    return D.self_attn * (2 * a["clip"] + 1) * D.d_k


def t5_bias_layer(D: Dims, a: dict) -> int:
    # Raffel et al. 2020, section 2.1: a scalar for each (bucket, head), num_buckets x h. Here every layer's
    # self-attention has its own table (Narang et al. 2021 compared this with T5's one per stack). No
    # cross-attention bias.
    return D.self_attn * a["num_buckets"] * D.h


def partial_rope(D: Dims, a: dict) -> int:
    # GPT-NeoX / GPT-J: rotations of a fraction of each head, from fixed frequencies. No parameters, like the
    # sinusoids it replaces.
    return 0


def rezero_norm(D: Dims, a: dict) -> int:
    # Narang et al. 2021, "ReZero + LayerNorm": x + alpha F(LN(x)). An alpha scalar from 0 for each residual
    # connection (Mesh TensorFlow's sublayer_rezero); the LayerNorm moves before the sub-layer (same count), and
    # each stack ends with a LayerNorm, as pre-norm T5 does.
    return D.residuals * 1 + D.stacks * D.LN


def layerscale(D: Dims, a: dict) -> int:
    # Touvron et al. 2021 (CaiT): x + diag(lambda) F(LN(x)), with a lambda of d for each residual branch, pre-norm,
    # and a final LayerNorm in each stack.
    return D.residuals * D.d + D.stacks * D.LN


def rezero(D: Dims, a: dict) -> int:
    # Bachlechner et al. 2020: x + alpha F(x), alpha from 0, and no LayerNorm. ablate takes one alpha per residual
    # connection (2 per encoder layer, 3 per decoder layer), as Narang et al. 2021 and Mesh TensorFlow do; the
    # authors' RZTX layers share one alpha among a layer's sub-layers ("a single additional learned parameter per
    # layer"), which would be D.layers alphas. The variant's description says "one learned alpha per connection".
    return D.residuals * 1 - D.residuals * D.LN


def fixup(D: Dims, a: dict) -> int:
    # Zhang et al. 2019, rule 3: a scalar multiplier (from 1) in every branch and a scalar bias (from 0) before it,
    # and no LayerNorm. ablate puts one bias before each whole sub-layer, x + s F(x + b): 1 + 1 per residual branch.
    # The authors' Transformer (fairseq transformer_zero.py) also shifts inside the FFN branch, before the ReLU and
    # before W2 (2 more scalars per FFN); the variant's description says where ablate's biases are.
    return D.residuals * (1 + 1) - D.residuals * D.LN


def share_encoder(D: Dims, a: dict) -> int:
    # Lan et al. 2020 (ALBERT) sharing in the encoder: its N layers are one layer, so N - 1 fewer.
    return -(D.N - 1) * D.enc_layer


def share_decoder(D: Dims, a: dict) -> int:
    # The same for the decoder's layers (a decoder-only model's layers are encoder-like: no cross-attention).
    return -(D.N - 1) * (D.dec_layer if D.enc_dec else D.enc_layer)


def universal(D: Dims, a: dict) -> int:
    # Dehghani et al. 2019: each stack is one layer, applied N times. The halting unit of ACT (Graves 2016),
    # p = sigmoid(w . s + b), gives each stack w (d) and b (1) (tensor2tensor: a dense layer of 1 unit with a
    # bias). The timestep signal is fixed sinusoids.
    return share_encoder(D, a) * D.enc_dec + share_decoder(D, a) + D.stacks * (D.d + 1)


def moe(D: Dims, a: dict) -> int:
    # GShard / Switch (Fedus et al. 2022, eq. 1-2): every FFN becomes E expert FFNs, and a router W_r (d x E, no
    # bias). Each expert is the model's FFN (equation 2, b1 and b2 included; T5-based Switch has no biases
    # anywhere). Shazeer et al. 2017's noise weights W_noise are not part of GShard's and Switch's routers.
    E = a["n_experts"]
    return D.ffn * ((E - 1) * D.F + D.d * E)


def glu(D: Dims, a: dict) -> int:
    # Shazeer 2020: FFN_GLU(x) = (sigma(x W) * x V) W2, three matrices W, V (d x d_ff) and W2 (d_ff x d), with no
    # biases ("we omit bias terms"), and d_ff kept. Bilinear drops the sigma: same count.
    return D.ffn * (3 * D.d * D.d_ff - D.F)


def factorized_untied(D: Dims, a: dict) -> int:
    # Lan et al. 2020 (ALBERT): V x E then E x H, an E = d_embed table and a projection (no bias) in place of the
    # V x d matrix. Untied: the source, the target and the pre-softmax projection each have their own. A
    # decoder-only model has the last two.
    E = a["d_embed"]
    copies = 3 if D.enc_dec else 2
    return copies * (D.V * E + E * D.d) - D.V * D.d


def mos(D: Dims, a: dict) -> int:
    # Yang et al. 2018: pi = softmax(x W_pi) with W_pi in R^{d x K}, h_k = tanh(W_{h,k} x) with W_{h,k} in
    # R^{d x d}, and no biases in the paper's equations. The embedding matrix is still tied three ways.
    K = a["n_components"]
    return D.d * K + K * D.d * D.d


def clusters(D: Dims, a: dict) -> tuple[list[int], list[int]]:
    """Cluster sizes V_i, from cutoffs given as fractions of V, and widths d_i = floor(d / div^i)."""
    ids = [round(float(c) * D.V) for c in a["cutoffs"].split(",")]
    bounds = [0, *ids, D.V]
    sizes = [b - a_ for a_, b in zip(bounds, bounds[1:])]  # [6, 6, 12] for V = 24, cutoffs 0.25, 0.5
    widths = [int(D.d // a["div_value"] ** i) for i in range(len(sizes))]  # [32, 8, 2] for d = 32, div 4
    return sizes, widths


def adaptive_input(D: Dims, a: dict) -> int:
    # Baevski & Auli 2019: cluster i embeds its V_i words in d_i = d / 4^i dimensions, V_i x d_i, and projects them
    # to d (d_i x d, no bias, every cluster as fairseq). Tied adaptive softmax: the same tables and projections
    # score the words. The head's extra logits, one for each tail cluster (d x n_tail, no bias), are the only
    # new matrix. One set serves source, target and the softmax, as the tied V x d it replaces.
    sizes, widths = clusters(D, a)
    tables = sum(v * w for v, w in zip(sizes, widths))
    projections = sum(w * D.d for w in widths)
    return tables + projections + D.d * (len(sizes) - 1) - D.V * D.d


def adaptive_softmax(D: Dims, a: dict) -> int:
    # Grave et al. 2017: the head scores the first cluster's V_0 words and one logit per tail cluster,
    # d x (V_0 + n_tail); tail cluster i projects d -> d_i = d / 4^i, then d_i -> V_i (no biases). The input
    # embeddings are untied from it: a source table and a target table of V x d (a decoder-only model has only
    # the target's), in place of the one shared V x d.
    sizes, widths = clusters(D, a)
    head = D.d * (sizes[0] + len(sizes) - 1)
    tails = sum(D.d * w + w * v for v, w in zip(sizes[1:], widths[1:]))
    return D.stacks * D.V * D.d + head + tails - D.V * D.d


# (id, overrides, architectures, expected change)
CASES: list[tuple[str, list[str], tuple[str, ...], Callable[[Dims, dict], int]]] = [
    ("attention=talking_heads", ["model.attention=talking_heads"], (ED, DO), talking_heads),
    ("attention=gated", ["model.attention=gated"], (ED, DO), gated),
    ("attention=differential", ["model.attention=differential"], (ED, DO), differential),
    ("attention=mla", ["model.attention=mla"], (ED, DO), mla),
    ("attention=mla,d_q_latent=16", ["model.attention=mla", "model.attention_args.d_q_latent=16"], (ED, DO), mla),
    ("attention=synthesizer_dense", ["model.attention=synthesizer_dense"], (ED, DO), synthesizer_dense),
    ("attention=synthesizer_random", ["model.attention=synthesizer_random"], (ED, DO), synthesizer_random),
    ("attention=synthesizer_random,fixed", ["model.attention=synthesizer_random",
                                            "model.attention_args.fixed=true"], (ED, DO), synthesizer_random),
    ("attention=lightconv", ["model.attention=lightconv"], (ED, DO), lightconv),
    ("attention=dynamicconv", ["model.attention=dynamicconv"], (ED, DO), dynamicconv),
    ("positional=relative", ["model.positional=relative"], (ED, DO), relative),
    ("positional=t5_bias_layer", ["model.positional=t5_bias_layer"], (ED, DO), t5_bias_layer),
    ("positional=partial_rope", ["model.positional=partial_rope"], (ED, DO), partial_rope),
    ("norm_position=rezero_norm", ["model.norm_position=rezero_norm"], (ED, DO), rezero_norm),
    ("norm_position=layerscale", ["model.norm_position=layerscale"], (ED, DO), layerscale),
    ("norm_position=fixup", ["model.norm_position=fixup"], (ED, DO), fixup),
    ("norm_position=rezero", ["model.norm_position=rezero"], (ED, DO), rezero),
    ("sharing=universal", ["model.sharing=universal"], (ED, DO), universal),
    ("sharing=encoder", ["model.sharing=encoder"], (ED,), share_encoder),  # decoder-only: refused, no encoder
    ("sharing=decoder", ["model.sharing=decoder"], (ED, DO), share_decoder),
    ("ffn=moe", ["model.ffn=moe"], (ED, DO), moe),
    ("ffn=switch", ["model.ffn=switch"], (ED, DO), moe),
    ("ffn=glu", ["model.ffn=glu"], (ED, DO), glu),
    ("ffn=bilinear", ["model.ffn=bilinear"], (ED, DO), glu),
    ("embedding=factorized_untied", ["model.embedding=factorized_untied"], (ED, DO), factorized_untied),
    ("embedding=mos", ["model.embedding=mos"], (ED, DO), mos),
    ("embedding=adaptive_input", ["model.embedding=adaptive_input"], (ED, DO), adaptive_input),
    ("embedding=adaptive_softmax", ["model.embedding=adaptive_softmax"], (ED, DO), adaptive_softmax),
]

PARAMS = [
    pytest.param(overrides, arch, expected, id=f"{name}-{arch}")
    for name, overrides, archs, expected in CASES
    for arch in archs
]


@lru_cache(maxsize=None)
def built(arch: str, *overrides: str) -> tuple[int, dict[str, Any]]:
    """(total parameters, the resolved model config) of the TINY model of ``arch`` with ``overrides``, built on
    the meta device (counting needs no memory)."""
    cfg = ablate.load_config(None, [*TINY, f"model.arch={arch}", *overrides])
    with torch.device("meta"):
        total = ablate.count_parameters(ablate.build_model(cfg))["total"]
    return total, OmegaConf.to_container(cfg.model, resolve=True)


@pytest.mark.parametrize("arch", [ED, DO])
def test_the_default_model_counts_as_the_paper(arch):
    """The baseline every case below is measured from: N (3A + 2F + 10d) + V d (decoder-only: N (A + F + 4d) + V d)."""
    D = Dims(arch)
    assert (D.d_k, D.A, D.F) == (8, 4 * 32 * 32 + 4 * 32, 2 * 32 * 64 + 64 + 32)  # the formulas, at TINY's dims
    assert built(arch)[0] == D.default_total


@pytest.mark.parametrize("overrides,arch,expected", PARAMS)
def test_variant_changes_the_count_as_its_paper_says(overrides, arch, expected):
    kind = overrides[0].split("=", 1)[0].split(".", 1)[1]  # model.attention=mla -> attention
    total, model_cfg = built(arch, *overrides)
    args = model_cfg[f"{kind}_args"]  # the variant's own hyperparameters, defaults filled in (max_len, d_latent ...)
    want = expected(Dims(arch), args)
    got = total - built(arch)[0]
    assert got == want, f"{overrides} ({arch}): {got:+d} parameters, the paper's formula gives {want:+d}"


def test_formulas_at_tiny_dims_by_hand():
    """A few of the formulas' values worked out longhand at d = 32, h = 4, d_k = d_v = 8, d_ff = 64, V = 24, N = 2,
    so that a slip in a formula's code cannot hide behind the same slip in the model."""
    ed, do = Dims(ED), Dims(DO)
    assert talking_heads(ed, {}) == 6 * 2 * 16  # 3N = 6 attentions, two 4 x 4 matrices
    assert gated(do, {}) == 2 * (32 * 32 + 32)  # N = 2 self-attentions, a 32 -> 32 gate with bias
    assert differential(ed, {}) == 6 * (4 * 4 + 8)
    assert relative(ed, {"clip": 16}) == 4 * 33 * 8  # 2N self-attentions, 33 vectors of 8
    assert t5_bias_layer(do, {"num_buckets": 32}) == 2 * 32 * 4
    assert rezero(ed, {}) == 10 - 10 * 64  # 5N = 10 connections' alphas; their 10 LayerNorms of 2d go
    assert fixup(ed, {}) == 10 * 2 - 10 * 64  # a bias and a scale per connection
    assert mos(ed, {"n_components": 4}) == 32 * 4 + 4 * 32 * 32
    sizes_widths = clusters(ed, {"cutoffs": "0.25,0.5", "div_value": 4.0})
    assert sizes_widths == ([6, 6, 12], [32, 8, 2])
    assert adaptive_input(ed, {"cutoffs": "0.25,0.5", "div_value": 4.0}) == (
        (6 * 32 + 6 * 8 + 12 * 2) + (32 + 8 + 2) * 32 + 32 * 2 - 24 * 32)
    assert adaptive_softmax(do, {"cutoffs": "0.25,0.5", "div_value": 4.0}) == (
        32 * (6 + 2) + (32 * 8 + 8 * 6) + (32 * 2 + 2 * 12))
