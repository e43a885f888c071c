"""The memory allocator under ablate's training loop: glibc malloc, jemalloc, and tuned glibc, in subprocesses.

Each setting runs the same loop in a fresh process (the environment must be set before start):
the Multi30k-sized ablate model, Multi30k-like token batches, forward + label-smoothed
cross-entropy + backward + Adam, in fp32 and in bf16 autocast. Settings are interleaved per round;
reported: target tokens/s (median of steps, then of rounds), minor page faults per step (getrusage),
peak RSS, and the ratio to glibc's default. The child confirms its allocator from /proc/self/maps.

Without native bf16 (AVX512-BF16/AMX) the bf16 loop runs on small batches: a 4096-token step would
take minutes there.

    python benchmarks/allocator.py [--quick] [--threads N]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import _common as C

JEMALLOC = next((p for p in ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                             "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2", "/usr/lib64/libjemalloc.so.2",
                             "/usr/local/lib/libjemalloc.so.2") if Path(p).exists()), None)
NO_CHURN = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736"
SETTINGS = {  # name: environment added to the child's
    "glibc (default)": {},
    "jemalloc": {"LD_PRELOAD": JEMALLOC},
    "jemalloc, no decay": {"LD_PRELOAD": JEMALLOC, "MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
    "glibc mmap+trim thresholds": {"GLIBC_TUNABLES": NO_CHURN},
    "glibc thresholds+top_pad, 2 arenas": {"GLIBC_TUNABLES": NO_CHURN + ":glibc.malloc.top_pad=268435456",
                                           "MALLOC_ARENA_MAX": "2"},
}
# precision: (tokens, timed steps, rounds, quick tokens, quick steps, quick rounds)
PLAN = {"fp32": (4096, 2, 2, 1024, 2, 1), "bf16": (4096, 2, 2, 1024, 2, 1)}
EMULATED_BF16 = (128, 2, 1)


def child(precision: str, tokens: int, steps: int, threads: int | None) -> None:
    """In the subprocess: one warm-up step, then ``steps`` timed ones; print a JSON line."""
    import torch

    import ablate

    if threads:
        torch.set_num_threads(threads)
    cfg = ablate.load_config(C.REPO / "configs/multi30k.yaml")
    batches = C.synthetic_batches(steps + 1, max_tokens=tokens, vocab_size=cfg.data.vocab_size)
    torch.manual_seed(0)
    model = ablate.build_model(cfg)
    step = C.train_step(model, lambda b: model(b["src_ids"], b["tgt_ids"]), precision=precision)
    step(batches[0])
    tps, faults = [], []
    for b in batches[1:]:
        f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        step(b)
        tps.append(C.real_tokens(b) / (time.perf_counter() - t0))
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    print(json.dumps({"allocator": C.allocator(), "tokens_per_s": C.median(tps), "minflt_per_step": C.median(faults),
                      "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)


def spawn(env_add: dict, precision: str, tokens: int, steps: int, threads: int | None) -> dict:
    drop = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_CONF")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_add)
    cmd = [sys.executable, __file__, "--child", precision, str(tokens), str(steps), str(threads or 0)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=C.REPO)
    if out.returncode != 0:
        raise RuntimeError(f"child failed under {env_add}: {out.stderr[-800:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if "--child" in sys.argv:
        precision, tokens, steps, threads = sys.argv[sys.argv.index("--child") + 1:][:4]
        child(precision, int(tokens), int(steps), int(threads))
        return
    args = C.parse_args(__doc__)
    settings_run = {k: v for k, v in SETTINGS.items() if JEMALLOC or "LD_PRELOAD" not in v}
    if not JEMALLOC:
        print("libjemalloc.so.2 not found: jemalloc skipped (apt-get install -y libjemalloc2)")
    native = C.bf16_native()
    plan = {}
    for p, (tok, steps, rounds, q_tok, q_steps, q_rounds) in PLAN.items():
        plan[p] = (q_tok, q_steps, q_rounds) if args.quick else (tok, steps, rounds)
        if p == "bf16" and not native:
            plan[p] = EMULATED_BF16
    settings = {"model": "configs/multi30k.yaml (ablate)", "plan (tokens, timed steps, rounds)": plan,
                "threads": args.threads or "torch default", "jemalloc": JEMALLOC, "envs": settings_run}
    info = C.print_header("allocator: glibc vs jemalloc vs tuned glibc under ablate's training loop", settings)
    results = {}
    for precision, (tokens, steps, rounds) in plan.items():
        runs = C.interleave({name: (lambda r, e=env, p=precision, t=tokens, s=steps: spawn(e, p, t, s, args.threads))
                             for name, env in settings_run.items()}, rounds=rounds, warmup=0)
        base = C.median([r["tokens_per_s"] for r in runs["glibc (default)"]])
        rows, res = [], {}
        for name, rs in runs.items():
            tps = C.median([r["tokens_per_s"] for r in rs])
            res[name] = {"tokens_per_s": tps, "vs_glibc": tps / base, "allocator_seen": rs[0]["allocator"],
                         "minflt_per_step": C.median([r["minflt_per_step"] for r in rs]),
                         "max_rss_mb": max(r["max_rss_mb"] for r in rs)}
            rows.append([name, rs[0]["allocator"].split(" ")[0], tps, C.spread([r["tokens_per_s"] for r in rs]),
                         res[name]["minflt_per_step"], res[name]["max_rss_mb"], tps / base])
        print(f"\n[{precision}] ~{tokens} tokens/batch, {steps} timed steps after 1 warm-up, {rounds} round(s)")
        print(C.table(["setting", "seen", "tokens/s", "range", "minflt/step", "max RSS MB", "vs glibc"], rows))
        results[precision] = {"tokens": tokens, "steps": steps, "rounds": rounds, "settings": res}
    C.emit("allocator", info, settings, results)


if __name__ == "__main__":
    main()
