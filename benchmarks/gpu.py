"""GPU throughput of the paper's base model in bf16-mixed: tokens/s, model FLOPs utilisation, the SDPA path,
``torch.compile``, and a Table 3 sweep with one and with K runs per GPU.

On a CUDA device: (1) tokens/s of the training step (bf16 autocast, as Lightning's bf16-mixed, fused Adam) and
MFU = tokens/s x ``ablate.model.flops.flops_per_token`` / the GPU's peak dense bf16 FLOP/s, eager and
through ``torch.compile`` (what ``trainer.compile=true`` does), with the compile time;
(2) which scaled_dot_product_attention kernel each attention runs with ablate's boolean masks
(profiler op names) and which backends accept those masks; (3) what the alternatives would give,
timed per call (forward + backward) on the model's shapes: the decoder self-attention with
``is_causal=True`` and no mask (exact when padding is only on the right: a real query never sees a
right-padded key under the causal mask, and padded queries are ignored by the loss), and the
encoder/cross attention without a key-padding mask (an upper bound: it needs packed or varlen
sequences to stay exact); (4) unless ``--no-sweep``: the wall time of ``experiments/table3_multi30k.yaml``
(one seed, ``--sweep-steps`` steps per run) with ``--runs-per-gpu 1`` and with ``--runs-per-gpu K``
(``--pack K``, default auto). Without CUDA it says so and exits 0.

    python benchmarks/gpu.py [--quick] [--peak-tflops X] [--no-sweep] [--sweep-steps 300] [--pack auto]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

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


def sweep_wall_time(runs_per_gpu: str, steps: int, out: str) -> tuple[float, int]:
    """Seconds ``ablate sweep experiments/table3_multi30k.yaml`` takes at ``steps`` steps per run, and how many runs
    finished. Each setting gets its own sweep directory: nothing is skipped as already done."""
    data = os.environ.get("ABLATE_SHARED_DATA", str(C.REPO.parent / "shared" / "data"))
    cmd = [sys.executable, "-m", "ablate.cli", "sweep", str(C.REPO / "experiments/table3_multi30k.yaml"),
           "--runs-per-gpu", runs_per_gpu, "--out", out, f"train.max_steps={steps}",
           f"train.val_every={steps}", "train.val_bleu=false", "logger=none", f"data.path={data}/multi30k"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=C.REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stderr[-2000:])
    finished = sum(json.loads(p.read_text()).get("status") == "finished" for p in Path(out).glob("runs/*/result.json"))
    return wall, finished


def main() -> None:
    def options(p):
        p.add_argument("--peak-tflops", type=float, default=None, help="peak dense bf16 TFLOP/s of this GPU")
        p.add_argument("--no-sweep", action="store_true", help="skip the Table 3 sweep timing")
        p.add_argument("--sweep-steps", type=int, default=300, help="training steps per run of the timed sweep")
        p.add_argument("--pack", default="auto", help="runs per GPU of the packed sweep (an integer or auto)")

    args = C.parse_args(__doc__, options)
    settings = {"config": "configs/transformer_base.yaml", "precision": "bf16-mixed (autocast)", "quick": args.quick}
    info = C.print_header("gpu: base model tokens/s, MFU and SDPA path", settings)
    if not torch.cuda.is_available():
        print("no CUDA device available: nothing to measure here (run this on a GPU machine)")
        C.emit("gpu", info, settings, {"skipped": "no CUDA device"})
        return
    tokens, steps = (8192, 5) if args.quick else (25000, 20)
    cfg = ablate.load_config(C.REPO / "configs/transformer_base.yaml")
    batches = C.to_device(C.synthetic_batches(steps + 3, max_tokens=tokens, vocab_size=cfg.data.vocab_size), "cuda")
    seq = sum(b["tgt_ids"].size(1) for b in batches) / len(batches)
    fpt = flops_per_token(cfg, seq_len=round(seq))
    peak = peak_tflops(info["gpu"], args.peak_tflops)
    contenders, steps_of, compile_s = {}, {}, None
    for name in ("eager", "torch.compile"):
        torch.manual_seed(0)
        model = ablate.build_model(cfg).cuda()
        forward = torch.compile(model) if name == "torch.compile" else model
        step = C.train_step(model, lambda b, f=forward: f(b["src_ids"], b["tgt_ids"]), precision="bf16",
                            device="cuda", fused_adam=True)
        if name == "torch.compile":  # the first steps compile (a few shapes: batches differ in length)
            t0 = time.perf_counter()
            for b in batches[:3]:
                step(b)
            compile_s = time.perf_counter() - t0
        steps_of[name] = step
        contenders[name] = lambda r, st=step: C.discard(st(batches[r % len(batches)]))
    times = C.interleave(contenders, rounds=steps, warmup=3)
    print(f"\n~{tokens} tokens/batch (mean padded target length {seq:.0f}), {steps} steps after 3 warm-up; "
          f"compiling took {compile_s:.0f} s")
    rows, figures = [], {}
    for name, ts in times.items():
        tps = [C.real_tokens(batches[r % len(batches)]) / t for r, t in enumerate(ts)]
        mfu = C.median(tps) * fpt / (peak * 1e12) if peak else float("nan")
        figures[name] = {"tokens_per_s": C.median(tps), "mfu": mfu, "step_ms": 1e3 * C.median(ts)}
        rows.append([f"base bf16-mixed, {name}", C.median(tps), C.spread(tps), fpt / 1e9, C.median(tps) * fpt / 1e12,
                     peak or float("nan"), mfu])
    print(C.table(["model", "tokens/s", "range", "GFLOP/token", "TFLOP/s", "peak TFLOP/s", "MFU"], rows))
    speedup = figures["torch.compile"]["tokens_per_s"] / figures["eager"]["tokens_per_s"]
    print(f"torch.compile / eager: {speedup:.2f}x tokens/s")
    results = {"eager": figures["eager"], "compiled": figures["torch.compile"], "compile_s": compile_s,
               "compile_speedup": speedup, "flops_per_token": fpt, "peak_tflops": peak,
               **attention_section(cfg, steps_of["eager"], batches[0], 1e3 * C.median(times["eager"]), args.quick)}
    if not args.no_sweep:
        results["sweep"] = sweep_section(args.sweep_steps, args.pack)
    C.emit("gpu", info, settings, results)


def attention_section(cfg, step, batch, step_ms: float, quick: bool) -> dict:
    """Which SDPA kernels one step runs, and what is_causal / unmasked attention would save."""
    ops = sdpa_ops(step, batch)
    print(f"\nSDPA kernels in one step (forward ops): {ops}")
    rows, alt = [], {}
    reps = 5 if quick else 20
    for name, (q, k, v, mask, alt_mask, alt_causal, calls) in attention_cases(cfg, batch).items():
        now, after = time_sdpa(q, k, v, mask, False, reps), time_sdpa(q, k, v, alt_mask, alt_causal, reps)
        ok = accepts(q, k, v, mask, False)
        alt[name] = {"accepts_ablate_mask": ok, "ms_now": now, "ms_alternative": after, "calls_per_step": calls}
        rows.append([name, ", ".join(b.split("_")[0].lower() for b, y in ok.items() if y == "yes"), now,
                     "is_causal, no mask" if alt_causal else "no mask (needs packing)", after, now / after,
                     calls * (now - after)])
    print(C.table(["attention", "backends accepting ablate's mask", "ms fwd+bwd", "alternative", "ms", "speed-up",
                   "ms saved/step"], rows))
    print(f"step: {step_ms:.1f} ms; the decoder is_causal change alone would save "
          f"{rows[1][-1]:.1f} ms/step ({100 * rows[1][-1] / step_ms:.1f} %)")
    return {"step_ms": step_ms, "sdpa_ops": ops, "attention": alt}


def sweep_section(steps: int, pack: str) -> dict:
    """Wall time of the Table 3 sweep (one seed) with one run per GPU, then with ``pack`` runs per GPU."""
    rows, out = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in ("1", pack):
            wall, finished = sweep_wall_time(k, steps, f"{tmp}/k{k}")
            out[k] = {"wall_s": wall, "finished": finished}
            rows.append([f"table3_multi30k, {steps} steps/run, --runs-per-gpu {k}", wall, finished])
    print(f"\n{C.table(['sweep', 'wall s', 'runs finished'], rows)}")
    print(f"packed / one per GPU: {out['1']['wall_s'] / out[pack]['wall_s']:.2f}x faster")
    return out


if __name__ == "__main__":
    main()
