"""Training-step throughput: ablate's model against torch.nn.Transformer (and x-transformers) doing the same work.

Target tokens/s of forward + label-smoothed cross-entropy + backward + Adam step on the same
token-batched, padded batches, interleaved in one process, in fp32 and bf16 autocast (= Lightning's
bf16-mixed). The baselines get what ablate's model has: shared source/target/output embeddings scaled
by sqrt(d_model), sinusoidal positions, dropout on the embedding sums and sub-layer outputs only,
post-norm, ReLU, no final stack norm, key-padding masks on both sides, a causal decoder mask.
ablate steps with the optimiser ``ablate train`` uses (fused Adam); the peers with torch.optim.Adam
as a plain script creates it. ``nn.Transformer+fused`` is nn.Transformer given the fused Adam too,
to separate the optimiser's share of the difference from the model's. ablate's loss is the one ``ablate train``
takes (only the scored real tokens projected, chunked: ``ablate.train.loss``); ``ablate full-logits`` is the same
model and optimiser with the full (B, T, V) logits and ``F.cross_entropy``, as before issue 30 (their paired ratio
is printed).

    python benchmarks/train_step.py [--quick] [--threads N] [--profile] [--stock-nn] [--configs small,base]

``--stock-nn`` adds nn.Transformer as shipped (dropout also on attention weights and inside the FFN).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import _common as C
import ablate
from ablate.components.positional import sinusoid_table

CONFIGS = {"small": "configs/multi30k.yaml", "base": "configs/transformer_base.yaml"}
# (config, precision, tokens/batch, rounds, quick tokens, quick rounds); bf16 tokens shrink where bf16 is emulated
GROUPS = [("small", "fp32", 4096, 3, 1024, 1), ("small", "bf16", 4096, 3, 1024, 1),
          ("base", "fp32", 512, 3, 256, 1), ("base", "bf16", 512, 3, 256, 1)]
EMULATED_BF16_TOKENS = {"small": 128, "base": None}  # None: skipped (minutes per step without native bf16)


class Embed(nn.Module):
    """Token embedding * sqrt(d_model) + sinusoids, then dropout (ablate's InputLayer)."""

    def __init__(self, vocab: int, d_model: int, dropout: float):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.emb.weight, std=d_model**-0.5)
        self.register_buffer("pe", sinusoid_table(1024, d_model), persistent=False)
        self.drop, self.scale = nn.Dropout(dropout), math.sqrt(d_model)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.emb(ids) * self.scale + self.pe[: ids.size(1)])  # (B, T, d_model)


class TorchSeq2Seq(nn.Module):
    """torch.nn.Transformer (post-norm, ReLU, batch_first) between shared embeddings and a tied output.

    Its extra dropouts (on attention weights, inside the FFN) are switched off: ablate has neither.
    """

    def __init__(self, m, vocab: int, pad_id: int = 0, *, stock: bool = False):
        super().__init__()
        self.embed, self.pad_id = Embed(vocab, m.d_model, m.dropout), pad_id
        self.core = nn.Transformer(m.d_model, m.n_heads, m.n_layers, m.n_layers, m.d_ff, m.dropout,
                                   activation="relu", batch_first=True, norm_first=False)
        self.core.encoder.norm = self.core.decoder.norm = None  # post-norm stacks: no final norm
        for layer in [] if stock else [*self.core.encoder.layers, *self.core.decoder.layers]:
            layer.dropout = nn.Identity()  # FFN-inner dropout
            for attn in (getattr(layer, "self_attn", None), getattr(layer, "multihead_attn", None)):
                if attn is not None:
                    attn.dropout = 0.0  # attention-weight dropout

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        T = tgt_ids.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_ids.device).triu(1)  # (T, T), True = masked
        src_pad, tgt_pad = src_ids == self.pad_id, tgt_ids == self.pad_id  # (B, S), (B, T), True = padding
        x = self.core(self.embed(src_ids), self.embed(tgt_ids), tgt_mask=causal, src_key_padding_mask=src_pad,
                      tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return F.linear(x, self.embed.emb.weight)  # (B, T, V)


class XSeq2Seq(nn.Module):
    """x-transformers' encoder and decoder, same dimensions. Differs: no bias on Q/K/V/O, output scaled by d^-0.5."""

    def __init__(self, m, vocab: int):
        super().__init__()
        from x_transformers import Decoder, Encoder, TransformerWrapper

        layers = dict(dim=m.d_model, depth=m.n_layers, heads=m.n_heads, attn_dim_head=m.d_model // m.n_heads,
                      pre_norm=False, ff_mult=m.d_ff / m.d_model, ff_custom_activation=nn.ReLU(),
                      ff_sublayer_dropout=m.dropout, attn_sublayer_dropout=m.dropout, attn_flash=True)
        wrap = dict(num_tokens=vocab, max_seq_len=1024, scaled_sinu_pos_emb=True, emb_dropout=m.dropout)
        self.enc = TransformerWrapper(attn_layers=Encoder(**layers), return_only_embed=True, **wrap)
        self.dec = TransformerWrapper(attn_layers=Decoder(cross_attend=True, **layers), tie_embedding=True, **wrap)
        self.enc.token_emb = self.dec.token_emb  # three-way tying

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        src_mask = src_ids != 0  # (B, S), True = real token
        memory = self.enc(src_ids, mask=src_mask)  # (B, S, d_model)
        return self.dec(tgt_ids, mask=tgt_ids != 0, context=memory, context_mask=src_mask)  # (B, T, V)


def build(name: str, cfg) -> nn.Module | None:
    if name == "ablate":
        return ablate.build_model(cfg)
    if name.startswith("nn.Transformer"):
        return TorchSeq2Seq(cfg.model, cfg.data.vocab_size, stock="stock" in name)
    try:
        return XSeq2Seq(cfg.model, cfg.data.vocab_size)
    except ImportError:
        return None


def base(label: str) -> str:
    """The model a contender label runs: ``ablate full-logits`` is ablate, ``nn.Transformer+fused`` nn.Transformer."""
    return "ablate" if label.startswith("ablate") else label.removesuffix("+fused")


def forward(label: str, model: nn.Module):
    """The contender's forward: ablate as ``ablate train`` runs it (the decoder's output, then the projected loss);
    ``ablate full-logits`` as before issue 30 (logits (B, T, V), then F.cross_entropy); the peers' logits."""
    if label == "ablate":
        return lambda b: model.hidden(b["src_ids"], b["tgt_ids"])  # (B, T, d_model)
    return lambda b: model(b["src_ids"], b["tgt_ids"])  # (B, T, V)


def run_group(config: str, precision: str, tokens: int, rounds: int, models: dict, cfg, device: str, args) -> dict:
    batches = C.to_device(C.synthetic_batches(rounds + 1, max_tokens=tokens, vocab_size=cfg.data.vocab_size), device)
    labels = [(n, precision) for n in models] + [("nn.Transformer+fused", precision), ("ablate full-logits", precision)]
    labels += [("ablate", "fp32")] if precision == "bf16" else []
    steps = {f"{n} {p}": C.train_step(models[base(n)], forward(n, models[base(n)]), precision=p, device=device,
                                      fused_adam=n.startswith("ablate") or n.endswith("+fused"),
                                      projected=n == "ablate")
             for n, p in labels}
    print(f"\n[{config} {precision}] {CONFIGS[config]}: d_model {cfg.model.d_model}, {cfg.model.n_layers}+"
          f"{cfg.model.n_layers} layers, vocab {cfg.data.vocab_size}, ~{tokens} tokens/batch, target shapes "
          f"{[tuple(b['tgt_ids'].shape) for b in batches]}, {rounds} rounds after 1 warmup")
    times = C.interleave({k: (lambda r, s=s: C.discard(s(batches[r % len(batches)]))) for k, s in steps.items()},
                         rounds=rounds, warmup=1)
    tokens_r = [C.real_tokens(batches[r % len(batches)]) for r in range(rounds)]
    tps = {k: [n / t for n, t in zip(tokens_r, ts)] for k, ts in times.items()}
    ref = tps[f"nn.Transformer {precision}"]
    out = {"tokens": tokens, "rounds": rounds, "tokens_per_s": {k: C.median(v) for k, v in tps.items()}}
    rows = []
    for label, xs in tps.items():
        ratio, paired = C.median(xs) / C.median(ref), C.median([a / b for a, b in zip(xs, ref)])
        if not label.endswith(precision):  # ablate fp32 beside a bf16 group: no same-precision peer
            ratio = paired = float("nan")
        out.setdefault("vs_nn", {})[label] = ratio
        out.setdefault("vs_nn_paired", {})[label] = paired
        rows.append([label, C.median(xs), C.spread(xs), C.median(times[label]), ratio, paired])
    print(C.table(["contender", "tokens/s", "range", "s/step", "vs nn (medians)", "vs nn (paired)"], rows))
    full = tps[f"ablate full-logits {precision}"]
    out["projected_vs_full_logits"] = C.median([a / b for a, b in zip(tps[f"ablate {precision}"], full)])
    print(f"ablate (projected loss) / ablate full-logits, paired: {out['projected_vs_full_logits']:.3f}x")
    if precision == "bf16":
        out["ablate_bf16_vs_fp32"] = C.median(tps["ablate bf16"]) / C.median(tps["ablate fp32"])
        print(f"ablate bf16 / fp32 on these batches: {out['ablate_bf16_vs_fp32']:.3f}x")
    if args.profile:
        C.profile_steps({k: s for k, s in steps.items() if not k.startswith("x-")}, batches[0])
    return out


def main() -> None:
    def options(p):
        p.add_argument("--profile", action="store_true", help="profile two steps of each contender")
        p.add_argument("--configs", default="small,base")
        p.add_argument("--stock-nn", action="store_true", help="also nn.Transformer with its own extra dropouts")

    args = C.parse_args(__doc__, options)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    native = C.bf16_native()
    settings = {"device": device, "configs": args.configs, "quick": args.quick,
                "x_transformers": C.version_of("x-transformers"),
                "step": "fwd + CE(ls 0.1) + bwd + Adam (ablate: fused, as ablate train; peers: torch default)",
                "batches": "synthetic Multi30k-like lengths packed by TokenBatchSampler", "native_bf16": native}
    info = C.print_header("train_step: ablate vs torch.nn.Transformer", settings)
    results: dict = {}
    for config in args.configs.split(","):
        cfg = ablate.load_config(C.REPO / CONFIGS[config])
        torch.manual_seed(0)
        names = ["ablate", "nn.Transformer", "x-transformers"] + (["nn.Transformer(stock)"] if args.stock_nn else [])
        models = {n: m.to(device) for n in names if (m := build(n, cfg))}
        if "x-transformers" not in models:
            print("x-transformers is not installed: skipped (pip install x-transformers)")
        for name, precision, tokens, rounds, q_tokens, q_rounds in GROUPS:
            if name != config:
                continue
            tokens, rounds = (q_tokens, q_rounds) if args.quick else (tokens, rounds)
            if precision == "bf16" and not native:
                if EMULATED_BF16_TOKENS[config] is None:
                    print(f"\n[{config} bf16] skipped: no native bf16 on this CPU (emulated bf16 matmuls)")
                    continue
                tokens, rounds = EMULATED_BF16_TOKENS[config], 1
                print(f"\n(no native bf16 on this CPU: bf16 runs on {tokens}-token batches, ablate fp32 beside it)")
                models.pop("x-transformers", None)
            results[f"{config} {precision}"] = run_group(config, precision, tokens, rounds, models, cfg, device, args)
        del models
    C.emit("train_step", info, settings, results)


if __name__ == "__main__":
    main()
