"""bf16-mixed against fp32, by model width: where ``precision: auto``'s size threshold comes from.

On a CPU with native bf16 (AVX512-BF16, AMX), bf16 autocast speeds up large matmuls but adds a cast before and after
every one; at the quickstart's size (d_model 64) the casts cost more than the matmuls save. This times ``ablate
train``'s step (``_common.train_step``: the projected loss, fused Adam) at several widths of configs/default.yaml
(n_heads 4, d_ff = 4 d_model, everything else as configured), on the default task's own batches (64 sentences) and on
Multi30k-shaped ~1024-token batches, fp32 and bf16 interleaved in the same process, and prints bf16's speed-up
(fp32 ms / bf16 ms, paired median). ``ablate.train.precision.BF16_MIN_D_MODEL`` is the smallest width where bf16
was faster on both batch shapes.

    python benchmarks/precision.py [--quick] [--threads N] [--widths 64,128,256,512]
"""

from __future__ import annotations

import time

import torch

import _common as C
import ablate
from ablate.data import build_task
from ablate.train.precision import BF16_MIN_D_MODEL

STEPS, ROUNDS, QUICK_STEPS, QUICK_ROUNDS = 20, 3, 6, 1  # steps a contender times per round


def task_batches(cfg, n: int) -> list[dict]:
    """``n`` training batches of the config's own task (the quickstart's reversal task: 64 sentences)."""
    data = build_task(cfg)
    data.setup("fit")
    loader = iter(data.train_dataloader())
    return [next(loader) for _ in range(n)]


def width_config(d_model: int):
    return ablate.load_config(C.REPO / "configs/default.yaml",
                              ["logger=none", f"model.d_model={d_model}", f"model.d_ff={4 * d_model}"])


def time_width(d_model: int, shape: str, steps: int, rounds: int) -> dict[str, float]:
    """ms per step of fp32 and bf16 at ``d_model`` on batches of ``shape`` (``task`` or ``1024``)."""
    cfg = width_config(d_model)
    batches = (task_batches(cfg, steps) if shape == "task" else
               C.synthetic_batches(steps, max_tokens=1024, vocab_size=cfg.data.vocab_size))
    torch.manual_seed(0)
    models = {p: ablate.build_model(cfg) for p in ("fp32", "bf16")}
    step = {p: C.train_step(m, lambda b, m=m: m.hidden(b["src_ids"], b["tgt_ids"]), precision=p, fused_adam=True,
                            projected=True, pad_id=cfg.data.pad_id) for p, m in models.items()}

    def contender(p: str):
        def run(r: int) -> float:
            t0 = time.perf_counter()
            for b in batches:
                step[p](b)
            return (time.perf_counter() - t0) / len(batches) * 1e3
        return run

    ms = C.interleave({p: contender(p) for p in step}, rounds=rounds, warmup=1)
    paired = C.median([f / b for f, b in zip(ms["fp32"], ms["bf16"])])
    return {"fp32_ms": C.median(ms["fp32"]), "bf16_ms": C.median(ms["bf16"]), "bf16_speedup": paired,
            "tokens": int(sum(C.real_tokens(b) for b in batches) / len(batches))}


def main() -> None:
    args = C.parse_args(__doc__, lambda p: p.add_argument("--widths", default="64,128,256,512"))
    widths = [int(w) for w in args.widths.split(",")]
    steps, rounds = (QUICK_STEPS, QUICK_ROUNDS) if args.quick else (STEPS, ROUNDS)
    settings = {"widths": widths, "steps": steps, "rounds": rounds, "threshold_in_code": BF16_MIN_D_MODEL}
    info = C.print_header("precision: bf16-mixed vs fp32 by d_model", settings)
    if not info["bf16_native"]:
        print("bf16 is emulated on this CPU: auto picks fp32 whatever the size; nothing to measure")
        C.emit("precision", info, settings, {})
        return
    results, rows = {}, []
    for d in widths:
        for shape in ("task", "1024"):
            r = time_width(d, shape, steps, rounds)
            results[f"{d}/{shape}"] = r
            rows.append([d, "default task (64 sentences)" if shape == "task" else "~1024 tokens", r["tokens"],
                         r["fp32_ms"], r["bf16_ms"], r["bf16_speedup"]])
            print(f"  d_model {d}, {shape}: bf16 {r['bf16_speedup']:.2f}x fp32", flush=True)
    print(C.table(["d_model", "batches", "target tokens", "fp32 ms/step", "bf16 ms/step", "bf16 speed-up"], rows))
    faster = [d for d in widths if all(results[f"{d}/{s}"]["bf16_speedup"] > 1 for s in ("task", "1024"))]
    print(f"smallest width where bf16 is faster on both: {min(faster) if faster else 'none'}; "
          f"auto's threshold in ablate/train/precision.py: d_model >= {BF16_MIN_D_MODEL}")
    C.emit("precision", info, settings, results)


if __name__ == "__main__":
    main()
