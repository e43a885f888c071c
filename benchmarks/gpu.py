"""GPU throughput of the paper's base model in bf16-mixed: tokens/s, model FLOPs utilisation, and the SDPA path.

On a CUDA device: (1) tokens/s of the training step (bf16 autocast, as Lightning's bf16-mixed) and
MFU = tokens/s x ``ablate.model.flops.flops_per_token`` / the GPU's peak dense bf16 FLOP/s;
(2) which scaled_dot_product_attention kernel each attention runs with ablate's boolean masks
(profiler op names) and which backends accept those masks; (3) what the alternatives would give,
timed per call (forward + backward) on the model's shapes: the decoder self-attention with
``is_causal=True`` and no mask (exact when padding is only on the right: a real query never sees a
right-padded key under the causal mask, and padded queries are ignored by the loss), and the
encoder/cross attention without a key-padding mask (an upper bound: it needs packed or varlen
sequences to stay exact). Without CUDA it says so and exits 0.

    python benchmarks/gpu.py [--quick] [--peak-tflops X]
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

import _common as C
import ablate
from ablate.model.flops import flops_per_token

PEAK_BF16_TFLOPS = [("H200", 989), ("H100 NVL", 835), ("H100 PCIe", 756), ("H100", 989), ("A100", 312),
                    ("L40S", 362), ("L4", 121), ("A10", 125), ("4090", 165), ("3090", 71)]  # dense, no sparsity
BACKENDS = ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"]


def peak_tflops(name: str, override: float | None) -> float | None:
    return override or next((p for key, p in PEAK_BF16_TFLOPS if key in name), None)


def sdpa_ops(step, batch) -> dict[str, int]:
    """The SDPA implementations one training step calls (profiler op names) and how often."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        step(batch)
    return {e.key: e.count for e in p.key_averages() if "scaled_dot_product" in e.key and "backward" not in e.key
            and e.key != "aten::scaled_dot_product_attention"}


def accepts(q, k, v, mask, causal: bool) -> dict[str, str]:
    """Which SDPA backends run these inputs: 'yes' or the first line of why not."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = {}
    for name in BACKENDS:
        try:
            with sdpa_kernel(getattr(SDPBackend, name)), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
            out[name] = "yes"
        except (RuntimeError, AttributeError) as exc:
            out[name] = "no: " + str(exc).strip().splitlines()[0][:60]
    return out


def time_sdpa(q, k, v, mask, causal: bool, reps: int) -> float:
    """Median ms of one forward + backward call (default backend choice)."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    grad = torch.randn_like(q)
    times = []
    for i in range(reps + 3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal).backward(grad)
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return C.median(times)


def attention_cases(cfg, batch) -> dict[str, tuple]:
    """(q, k, v, current mask, alternative mask, alternative is_causal, calls per step) on the model's shapes."""
    m = cfg.model
    h, d = m.n_heads, m.d_k or m.d_model // m.n_heads
    src, tgt = batch["src_ids"], batch["tgt_ids"]
    B, S, T = src.size(0), src.size(1), tgt.size(1)

    def qkv(tq: int, tk: int):
        return [torch.randn(B, h, n, d, device="cuda", dtype=torch.bfloat16) for n in (tq, tk, tk)]

    src_pad = (src != 0)[:, None, None, :]  # (B, 1, 1, S): ablate's key-padding mask
    causal = torch.ones(T, T, dtype=torch.bool, device="cuda").tril()
    dec_mask = (tgt != 0)[:, None, None, :] & causal  # (B, 1, T, T): ablate's decoder self-mask
    n_enc, n_dec = m.n_encoder_layers or m.n_layers, m.n_decoder_layers or m.n_layers
    return {"encoder self": (*qkv(S, S), src_pad, None, False, n_enc),
            "decoder self": (*qkv(T, T), dec_mask, None, True, n_dec),
            "cross": (*qkv(T, S), src_pad, None, False, n_dec)}


def main() -> None:
    args = C.parse_args(__doc__, lambda p: p.add_argument("--peak-tflops", type=float, default=None,
                                                          help="peak dense bf16 TFLOP/s of this GPU"))
    settings = {"config": "configs/transformer_base.yaml", "precision": "bf16-mixed (autocast)", "quick": args.quick}
    info = C.print_header("gpu: base model tokens/s, MFU and SDPA path", settings)
    if not torch.cuda.is_available():
        print("no CUDA device available: nothing to measure here (run this on a GPU machine)")
        C.emit("gpu", info, settings, {"skipped": "no CUDA device"})
        return
    tokens, steps = (8192, 5) if args.quick else (25000, 20)
    cfg = ablate.load_config(C.REPO / "configs/transformer_base.yaml")
    batches = C.to_device(C.synthetic_batches(steps + 3, max_tokens=tokens, vocab_size=cfg.data.vocab_size), "cuda")
    torch.manual_seed(0)
    model = ablate.build_model(cfg).cuda()
    step = C.train_step(model, lambda b: model(b["src_ids"], b["tgt_ids"]), precision="bf16", device="cuda")
    times = C.interleave({"ablate bf16": lambda r: C.discard(step(batches[r % len(batches)]))}, rounds=steps, warmup=3)
    tps = [C.real_tokens(batches[r % len(batches)]) / t for r, t in enumerate(times["ablate bf16"])]
    seq = sum(b["tgt_ids"].size(1) for b in batches) / len(batches)
    fpt = flops_per_token(cfg, seq_len=round(seq))
    peak = peak_tflops(info["gpu"], args.peak_tflops)
    mfu = C.median(tps) * fpt / (peak * 1e12) if peak else float("nan")
    print(f"\n~{tokens} tokens/batch (mean padded target length {seq:.0f}), {steps} steps after 3 warm-up")
    print(C.table(["model", "tokens/s", "range", "GFLOP/token", "TFLOP/s", "peak TFLOP/s", "MFU"],
                  [["ablate base bf16-mixed", C.median(tps), C.spread(tps), fpt / 1e9, C.median(tps) * fpt / 1e12,
                    peak or float("nan"), mfu]]))
    ops = sdpa_ops(step, batches[0])
    print(f"\nSDPA kernels in one step (forward ops): {ops}")
    rows, alt = [], {}
    reps = 5 if args.quick else 20
    for name, (q, k, v, mask, alt_mask, alt_causal, calls) in attention_cases(cfg, batches[0]).items():
        now, after = time_sdpa(q, k, v, mask, False, reps), time_sdpa(q, k, v, alt_mask, alt_causal, reps)
        ok = accepts(q, k, v, mask, False)
        alt[name] = {"accepts_ablate_mask": ok, "ms_now": now, "ms_alternative": after, "calls_per_step": calls}
        rows.append([name, ", ".join(b.split("_")[0].lower() for b, y in ok.items() if y == "yes"), now,
                     "is_causal, no mask" if alt_causal else "no mask (needs packing)", after, now / after,
                     calls * (now - after)])
    print(C.table(["attention", "backends accepting ablate's mask", "ms fwd+bwd", "alternative", "ms", "speed-up",
                   "ms saved/step"], rows))
    step_ms = 1e3 * C.median(times["ablate bf16"])
    print(f"step: {step_ms:.1f} ms; the decoder is_causal change alone would save "
          f"{rows[1][-1]:.1f} ms/step ({100 * rows[1][-1] / step_ms:.1f} %)")
    C.emit("gpu", info, settings, {"tokens_per_s": C.median(tps), "flops_per_token": fpt, "mfu": mfu,
                                   "peak_tflops": peak, "step_ms": step_ms, "sdpa_ops": ops, "attention": alt})


if __name__ == "__main__":
    main()
