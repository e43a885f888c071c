"""GPU throughput of the paper's base model in bf16-mixed: tokens/s, model FLOPs utilisation and where a step's
time goes, before and after each change of issue 30; the SDPA path; optionally a Table 3 sweep with one and with K
runs per GPU. One call, under 5 minutes on an H100/H200 (the sweep is opt-in: ``--sweep``).

(1) The bf16 matmul peak measured here (an 8192^3 bf16 product) beside the spec figure. (2) The training step
(bf16 autocast, as Lightning's bf16-mixed; fused Adam; no host sync inside the step) on ~25k-token batches, as
contenders that add one change each: "before" (eager, full (B, T, V) logits + F.cross_entropy, greedy packing
as today), + the projected chunked loss (``ablate.train.loss``), + length buckets (``data.length_bucket``: static
shapes), + ``torch.compile(dynamic=False)`` of the model (static shapes make it pay), + FlexAttention over block
masks (``trainer.attention_kernel=flex``, ``ablate.train.kernels``); ``--no-projected-loss``, ``--no-buckets``,
``--no-compile``, ``--no-flex`` leave a change out. Every contender trains as ``ablate train`` does: cuDNN attention
off (pytorch#196678), the attention kernel chosen by ``choose_attention_kernel`` (a contender flex cannot serve
says so and runs SDPA: on a CPU, always). For each: tokens/s, MFU = tokens/s x
``ablate.model.flops.flops_per_token`` / peak (measured and spec), padding share, peak memory, and the step split
into matmuls, attention, elementwise, loss, optimiser and idle (torch.profiler kernels). (3) Which SDPA kernel each
attention runs with ablate's boolean masks and what ``is_causal`` / unmasked attention would save. (4) With
``--sweep``: the wall time of ``experiments/table3_multi30k.yaml`` with ``--runs-per-gpu 1`` and ``K``.

Without CUDA it says so in one line and exits 0; ``--cpu`` runs a tiny version of (2) on the CPU (a check that the
script works, not a GPU figure).

    python benchmarks/gpu.py [--quick] [--cpu] [--peak-tflops X] [--bucket 16] [--no-projected-loss]
                             [--no-buckets] [--no-compile] [--no-flex] [--sweep] [--sweep-steps 300] [--pack auto]
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
import _step_profile as P
import ablate
from ablate.model.flops import flops_per_token
from ablate.train.kernels import choose_attention_kernel, pin_attention_backends

PEAK_BF16_TFLOPS = [("H200", 989), ("H100 NVL", 835), ("H100 PCIe", 756), ("H100", 989), ("A100", 312),
                    ("L40S", 362), ("L4", 121), ("A10", 125), ("4090", 165), ("3090", 71)]  # dense, no sparsity
BACKENDS = ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"]
TINY_CPU = ["model.n_layers=1", "model.d_model=64", "model.n_heads=2", "model.d_ff=128", "data.vocab_size=1000"]
CHANGES = [("projected loss", "projected"), ("length buckets", "bucket"), ("torch.compile, static", "compiled"),
           ("flex attention", "flex")]


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


def contenders(args) -> list[tuple[str, dict[str, bool]]]:
    """"before" (today's step), then one more of issue 30's changes each, those turned off left out."""
    off = {"projected": args.no_projected_loss, "bucket": args.no_buckets, "compiled": args.no_compile or args.cpu,
           "flex": args.no_flex}
    current = dict.fromkeys(off, False)
    out = [("before: eager, full logits, greedy packing", dict(current))]
    for label, key in CHANGES:
        if not off[key]:
            current[key] = True
            out.append((f"+ {label}", dict(current)))
    return out


def run_contender(cfg, flags: dict[str, bool], batches: list[dict], device: str, steps: int) -> dict:
    """Time and profile one contender: warm-up (compiling each shape once), ``steps`` timed steps, 3 profiled."""
    torch.manual_seed(0)
    model = ablate.build_model(cfg).to(device)
    kernel, note = choose_attention_kernel(model, "flex" if flags["flex"] else "sdpa", torch.device(device))
    if note:
        print(f"  {note}")
    step = P.make_step(model, device=device, projected=flags["projected"], compiled=flags["compiled"])
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    shapes = {tuple(b["tgt_ids"].shape): b for b in batches}
    t0 = time.perf_counter()
    warm = list(shapes.values()) if flags["compiled"] else batches[:2]
    P.time_steps(step, warm, device)
    warm_s = time.perf_counter() - t0
    timed = batches[:steps]
    seconds = P.time_steps(step, timed, device)
    real = sum(C.real_tokens(b) for b in timed) / len(timed)
    slots = sum(b["tgt_ids"].numel() for b in timed) / len(timed)
    out = {"attention_kernel": kernel, "tokens_per_s": real / seconds, "step_ms": 1e3 * seconds, "warmup_s": warm_s,
           "shapes": len(shapes),
           "padding": 1 - real / slots, "split_ms": P.split(step, batches[:3], device),
           "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else float("nan")}
    del model, step
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def main() -> None:
    def options(p):
        p.add_argument("--cpu", action="store_true", help="without CUDA: a tiny CPU run of the step section")
        p.add_argument("--peak-tflops", type=float, default=None, help="spec peak dense bf16 TFLOP/s of this GPU")
        p.add_argument("--bucket", type=int, default=16, help="data.length_bucket of the bucketed contenders")
        p.add_argument("--no-projected-loss", action="store_true", help="leave out the projected chunked loss")
        p.add_argument("--no-buckets", action="store_true", help="leave out the length buckets")
        p.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
        p.add_argument("--no-flex", action="store_true", help="leave out FlexAttention")
        p.add_argument("--sweep", action="store_true", help="also time the Table 3 sweep (minutes)")
        p.add_argument("--sweep-steps", type=int, default=300, help="training steps per run of the timed sweep")
        p.add_argument("--pack", default="auto", help="runs per GPU of the packed sweep (an integer or auto)")

    args = C.parse_args(__doc__, options)
    began = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    settings = {"config": "configs/transformer_base.yaml", "precision": "bf16-mixed (autocast)", "quick": args.quick,
                "device": device, "bucket": args.bucket}
    info = C.print_header("gpu: base model tokens/s, MFU, step split, SDPA path", settings)
    if device == "cpu" and not args.cpu:
        print("gpu.py: no CUDA device here, nothing measured (--cpu runs a tiny CPU check of the same code)")
        C.emit("gpu", info, settings, {"skipped": "no CUDA device"})
        return
    cfg = ablate.load_config(C.REPO / "configs/transformer_base.yaml", TINY_CPU if device == "cpu" else [])
    tokens, steps = (512, 2) if device == "cpu" else (8192, 8) if args.quick else (25000, 20)
    make = lambda bucket: C.to_device(C.synthetic_batches(  # noqa: E731
        steps + 3, max_tokens=tokens, vocab_size=cfg.data.vocab_size, bucket=bucket), device)
    plain, bucketed = make(None), make(args.bucket)
    seq = sum(b["tgt_ids"].size(1) for b in plain) / len(plain)
    fpt = flops_per_token(cfg, seq_len=round(seq))
    spec = args.peak_tflops or next((p for k, p in PEAK_BF16_TFLOPS if k in info.get("gpu", "")), None)
    measured = P.matmul_peak_tflops(device, n=8192 if device == "cuda" else 512, reps=20 if device == "cuda" else 2)
    print(f"\nbf16 matmul peak measured here: {measured:.0f} TFLOP/s (spec: {spec or '-'}); "
          f"{fpt / 1e9:.3f} GFLOP per real target token at mean padded length {seq:.0f}")
    pin_attention_backends(torch.device(device))  # as ablate train does
    results = {"peak_tflops_measured": measured, "peak_tflops_spec": spec, "flops_per_token": fpt, "steps": {}}
    for label, flags in contenders(args):
        r = run_contender(cfg, flags, bucketed if flags["bucket"] else plain, device, steps)
        r["mfu_measured"] = r["tokens_per_s"] * fpt / (measured * 1e12)
        r["mfu_spec"] = r["tokens_per_s"] * fpt / (spec * 1e12) if spec else float("nan")
        results["steps"][label] = {**r, "flags": flags}
        print(f"  {label}: {r['tokens_per_s']:,.0f} tokens/s (warm-up {r['warmup_s']:.0f} s)", flush=True)
    print_steps(results["steps"], tokens, steps)
    if device == "cuda":
        eager = next(iter(results["steps"].values()))["step_ms"]
        results.update(attention_section(cfg, plain[0], eager, args.quick))
        if args.sweep:
            results["sweep"] = sweep_section(args.sweep_steps, args.pack)
    results["wall_s"] = time.perf_counter() - began
    print(f"\ngpu.py took {results['wall_s']:.0f} s in all (issue 30's budget: under 300 s without --sweep)")
    C.emit("gpu", info, settings, results)


def print_steps(steps: dict, tokens: int, n: int) -> None:
    """The contenders' table and their step split (ms per step)."""
    base = next(iter(steps.values()))["tokens_per_s"]
    rows = [[label, r["attention_kernel"], r["tokens_per_s"], r["tokens_per_s"] / base, r["step_ms"],
             r["mfu_measured"], r["mfu_spec"], 100 * r["padding"], r["shapes"], r["peak_mem_gb"]]
            for label, r in steps.items()]
    print(f"\n~{tokens} tokens/batch, {n} timed steps each after warm-up (compiled: one batch of each shape)")
    print(C.table(["step", "attention", "tokens/s", "vs before", "ms/step", "MFU (measured peak)", "MFU (spec)",
                   "% padding", "shapes", "peak GB"], rows))
    print("\nwhere a step's time goes (ms per step; idle = wall - busy kernels):")
    print(C.table(["part", *steps],
                  [[c, *(r["split_ms"][c] for r in steps.values())] for c in [*P.CATEGORIES, "wall"]]))


def attention_section(cfg, batch, step_ms: float, quick: bool) -> dict:
    """Which SDPA kernels one step runs, and what is_causal / unmasked attention would save."""
    torch.manual_seed(0)
    model = ablate.build_model(cfg).cuda()
    ops = sdpa_ops(P.make_step(model, device="cuda", projected=True, compiled=False), batch)
    del model
    print(f"\nSDPA kernels in one step (forward ops; cuDNN attention off, as ablate train sets it: pytorch#196678): "
          f"{ops}")
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
