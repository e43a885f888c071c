"""Helpers shared by the benchmark scripts: machine facts, interleaved timing, tables, JSON, batches.

Every benchmark compares contenders *in the same process and run*, interleaved
(round r runs the contenders in an order rotated by r: A B, B A, A B, ...), and
reports medians and the ratio of medians, because the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

REPO = Path(__file__).resolve().parent.parent
JSON_PREFIX = "BENCH_JSON "
MALLOC_ENV = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_CONF", "OMP_NUM_THREADS")


def parse_args(doc: str, add: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """``--quick`` (fewer steps, for iterating) plus the script's own options."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds (noisier)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    if add is not None:
        add(parser)
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return args


def allocator() -> str:
    """The malloc this process uses, read from /proc/self/maps: jemalloc, tcmalloc, mimalloc or glibc."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "unknown"
    for name in ("jemalloc", "tcmalloc", "mimalloc"):
        if f"lib{name}" in maps:
            return name
    tunables = os.environ.get("GLIBC_TUNABLES")
    return f"glibc ({tunables})" if tunables else "glibc"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def busy_others(interval: float = 0.5) -> int:
    """How many other processes used more than half a core over ``interval`` seconds (shared-machine noise)."""
    def ticks() -> dict[int, int]:
        out = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                out[int(stat.parent.name)] = int(fields[11]) + int(fields[12])  # utime + stime
            except (OSError, ValueError, IndexError):
                pass
        return out

    a = ticks()
    time.sleep(interval)
    b = ticks()
    hz = os.sysconf("SC_CLK_TCK")
    return sum(1 for pid, t in b.items() if pid != os.getpid() and (t - a.get(pid, t)) / hz > 0.5 * interval)


def bf16_native() -> bool:
    """Whether bf16 matmuls run natively here, as ``precision: auto`` decides it (imported late: torch)."""
    from ablate.train.precision import bf16_native as native

    return native()


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    import torch

    info: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "allocator": allocator(),
        "loadavg": Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?",
        "other_busy": busy_others(),
        "env": {k: os.environ[k] for k in MALLOC_ENV if k in os.environ},
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    info["bf16_native"] = bf16_native()
    return info


def print_header(title: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Print the benchmark's title, the machine and the settings; return the machine facts."""
    m = machine()
    print(f"== {title} ==")
    print(f"machine : {m['cpu']} ({m['cpu_capability']}), {m['cores_usable']}/{m['cores']} cores, "
          f"torch {m['torch']}, {m['threads']} threads, allocator {m['allocator']}"
          + (f", GPU {m['gpu']}" if "gpu" in m else "") + f", native bf16: {m['bf16_native']}, {m['date']}")
    if m["env"]:
        print(f"env     : {m['env']}")
    print(f"load    : loadavg {m['loadavg']}, {m['other_busy']} other busy process(es)"
          + (" -- the cores are shared: with every core in use, torch's OpenMP threads wait on each other;"
             " compare ratios, or try --threads 1" if m["other_busy"] else ""))
    print("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    sys.stdout.flush()
    return m


def interleave(contenders: dict[str, Callable[[int], Any]], *, rounds: int, warmup: int = 1) -> dict[str, list[Any]]:
    """Run each contender once per round, in an order rotated by the round, after ``warmup`` rounds.

    ``fn(r)`` gets the round index (use it to pick the same batch for every contender). It may
    return its own measurement (a float or a dict); ``None`` records its wall time in seconds.
    """
    names = list(contenders)
    out: dict[str, list[Any]] = {n: [] for n in names}
    for r in range(-warmup, rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            value = contenders[name](r)
            elapsed = time.perf_counter() - t0
            if r >= 0:
                out[name].append(elapsed if value is None else value)
    return out


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def spread(xs: Sequence[float]) -> str:
    """``min..max`` of a sample, for the table."""
    return f"{fmt(float(min(xs)))}..{fmt(float(max(xs)))}" if xs else "-"


def fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        if x != x:
            return "-"
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"
    return str(x)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table; numbers right-aligned."""
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(headers))]

    def line(items: Sequence[str]) -> str:
        return "  ".join(s.rjust(w) if num else s.ljust(w) for s, w, num in zip(items, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def emit(name: str, machine_info: dict[str, Any], settings: dict[str, Any], results: Any) -> None:
    """Print the one machine-readable line: ``BENCH_JSON {...}``."""
    blob = {"benchmark": name, "machine": machine_info, "settings": settings, "results": _finite(results)}
    print(JSON_PREFIX + json.dumps(blob, default=str, allow_nan=False))
    sys.stdout.flush()


def _finite(x: Any) -> Any:
    """NaN and infinities become null: the JSON line stays strict JSON."""
    if isinstance(x, float):
        return x if x == x and abs(x) != float("inf") else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def synthetic_lengths(n: int, seed: int) -> tuple[Any, Any]:
    """Source/target subword lengths shaped like Multi30k with an 8k BPE vocabulary.

    Means about 14 (en) and 15 (de) tokens, right-skewed, 4..60; the target follows the source.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    src = np.clip(rng.gamma(6.0, 14.0 / 6.0, n).round(), 4, 60).astype(np.int64)
    tgt = np.clip((src * rng.normal(1.08, 0.15, n)).round(), 3, 60).astype(np.int64)
    return src, tgt


def synthetic_batches(n_batches: int, *, max_tokens: int, vocab_size: int, pad_id: int = 0, bos_id: int = 1,
                      eos_id: int = 2, seed: int = 0, bucket: int | None = None) -> list[dict[str, Any]]:
    """``n_batches`` padded seq2seq batches packed like ``ablate``'s TokenBatchSampler (random ids); with ``bucket``
    (``data.length_bucket``), in its static shapes.

    Keys as :class:`ablate.data.collate.Seq2SeqCollator` makes them: ``src_ids`` (B, S),
    ``tgt_ids`` (B, T) = [BOS] + y, ``labels`` (B, T) = y + [EOS].
    """
    import numpy as np
    import torch

    from ablate.data.batching import TokenBatchSampler
    from ablate.data.collate import Seq2SeqCollator

    src_len, tgt_len = synthetic_lengths(20_000, seed)
    sampler = TokenBatchSampler(np.maximum(src_len, tgt_len + 1), max_tokens=max_tokens, shuffle=True, seed=seed,
                                drop_last=True, bucket=bucket)
    collate = Seq2SeqCollator(pad_id, bos_id, eos_id, bucket, max_tokens)
    g = torch.Generator().manual_seed(seed)
    out = []
    for idx in list(sampler)[:n_batches]:
        pairs = [(torch.randint(3, vocab_size, (int(src_len[i]),), generator=g).tolist(),
                  torch.randint(3, vocab_size, (int(tgt_len[i]),), generator=g).tolist()) for i in idx]
        out.append(collate(pairs))
    return out


def real_tokens(batch: dict[str, Any], pad_id: int = 0) -> int:
    """Real (non-pad) target tokens: the unit of tokens/s."""
    return int((batch["labels"] != pad_id).sum())


def train_step(model: Any, forward: Callable[[dict], Any], *, precision: str, device: str = "cpu",
               label_smoothing: float = 0.1, pad_id: int = 0, fused_adam: bool = False,
               projected: bool = False, sync: bool = True) -> Callable[[dict], Any]:
    """One optimiser step on a batch, as ``ablate train`` takes it: forward, label-smoothed
    cross-entropy ignoring padding, backward, Adam(0.9, 0.98, 1e-9) step. ``precision``: fp32 or bf16
    (autocast to bfloat16 around forward and loss, like Lightning's ``bf16-mixed``). ``fused_adam``:
    PyTorch's fused Adam (what ``ablate train`` uses) instead of its default implementation. ``projected``:
    ``forward`` returns the decoder's output (B, T, d_model) and the loss is ``ablate.train.loss.projected_loss``
    through ``model.generator`` (what ``ablate train`` does for a linear head) instead of full logits. ``sync``:
    wait for the device at the end of each step (False: the steps queue up as in training; the caller syncs)."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import record_function

    from ablate.train.loss import projected_loss

    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=fused_adam or None)

    def step(batch: dict) -> Any:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            with record_function("phase: forward"):
                logits = forward(batch)  # (B, T, V), or (B, T, d_model) when projected
            with record_function("phase: loss"):
                if projected:
                    loss = projected_loss(logits, model.generator, batch["labels"], pad_id, label_smoothing)
                else:
                    loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=pad_id,
                                           label_smoothing=label_smoothing)
        with record_function("phase: backward"):
            loss.backward()
        with record_function("phase: optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        if sync and device == "cuda":
            torch.cuda.synchronize()
        return loss.detach()

    return step


def to_device(batches: list[dict], device: str) -> list[dict]:
    return [{k: v.to(device) for k, v in b.items()} for b in batches]


def discard(_: Any) -> None:
    """Drop a result so that :func:`interleave` records wall time."""
    return None


def version_of(distribution: str) -> str | None:
    """The installed version of a distribution, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


CATEGORIES = [  # (category, op-name substrings; "=name" matches exactly); first match wins; self CPU time
    ("loss (log_softmax, nll)", ("log_softmax", "nll_loss", "cross_entropy")),
    ("attention (SDPA, softmax)", ("scaled_dot_product", "flash_attention", "efficient_attention", "_softmax",
                                   "baddbmm")),
    ("matmul / linear", ("addmm", "=aten::mm", "bmm", "matmul", "linear", "mkldnn")),
    ("layernorm", ("layer_norm",)),
    ("dropout", ("dropout", "bernoulli")),
    ("Adam elementwise", ("addcdiv", "addcmul", "lerp", "sqrt", "_foreach", "_fused_adam")),
    ("masks (compare, where, fill)", ("=aten::eq", "=aten::ne", "bitwise", "logical", "=aten::where", "masked_fill",
                                      "=aten::tril", "=aten::triu", "=aten::arange", "=aten::__and__",
                                      "=aten::__invert__")),
    ("copies, casts, views", ("copy", "_to_copy", "clone", "contiguous", "=aten::cat", "transpose", "view", "reshape",
                              "expand", "permute", "unsqueeze", "=aten::t", "split", "chunk", "slice")),
]


def _match(pattern: str, name: str) -> bool:
    return name == pattern[1:] if pattern.startswith("=") else pattern in name


def profile_steps(steps: dict, batch: dict, reps: int = 2) -> None:
    """Where a step's time goes, per contender (mean of ``reps`` interleaved profiled steps): phases
    (inclusive) and op categories (self time), in ms; and the SDPA implementations called."""
    from torch.profiler import ProfilerActivity, profile as prof

    cats: dict[str, dict[str, float]] = {label: {} for label in steps}
    sdpa: dict[str, set] = {label: set() for label in steps}
    for _ in range(reps):
        for label, step in steps.items():
            with prof(activities=[ProfilerActivity.CPU]) as p:
                step(batch)
            col = cats[label]
            for e in p.key_averages():
                if e.key.startswith("phase: "):
                    col[e.key] = col.get(e.key, 0.0) + e.cpu_time_total / 1e3 / reps
                    continue
                if "scaled_dot_product" in e.key and "backward" not in e.key:
                    sdpa[label].add(e.key.replace("aten::", ""))
                cat = next((c for c, keys in CATEGORIES if any(_match(k, e.key) for k in keys)), "other elementwise")
                col[cat] = col.get(cat, 0.0) + e.self_cpu_time_total / 1e3 / reps
    keys = sorted({k for c in cats.values() for k in c}, key=lambda k: (not k.startswith("phase"), k))
    print(table(["ms per step", *cats], [[k, *(c.get(k, 0.0) for c in cats.values())] for k in keys]))
    for label, names in sdpa.items():
        print(f"SDPA in {label}: {', '.join(sorted(names)) or 'none'}")
