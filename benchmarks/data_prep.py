"""Data preparation time on Multi30k: a first run into an empty cache dir, and cached runs after it.

Each run is a fresh Python process doing what ``ablate train configs/multi30k.yaml`` does before its
first step: ``prepare_data()`` (read the text, train or load the shared BPE tokenizer) and
``setup("fit")`` (tokenise train and val, drop over-long pairs), then build the train sampler.
Per round: a cold process on a new empty ``data.cache_dir`` (which then also times a fresh
datamodule in the same process), and a warm process on the same cache dir.

    python benchmarks/data_prep.py [--quick] [--data PATH]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time

import _common as C

DATA = "/work/shared/data/multi30k"
PHASES = ["tokenizer", "tokenise", "sampler", "total"]


def child(cache: str, data_path: str, again: bool) -> None:
    """Run in the subprocess: time the phases, print one JSON line per datamodule."""
    t0 = time.perf_counter()
    import datasets

    import ablate
    from ablate.data import build_task

    datasets.disable_progress_bars()
    cfg = ablate.load_config(C.REPO / "configs/multi30k.yaml", [f"data.path={data_path}", f"data.cache_dir={cache}"])
    imports = time.perf_counter() - t0  # imports and config (which imports the registered components)
    for attempt in range(2 if again else 1):
        t = {"imports": imports if attempt == 0 else 0.0}
        start = time.perf_counter()
        data = build_task(cfg)
        data.prepare_data()
        t["tokenizer"] = time.perf_counter() - start
        data.setup("fit")
        t["tokenise"] = time.perf_counter() - start - t["tokenizer"]
        n_batches = len(data.sampler("train"))
        t["total"] = time.perf_counter() - start
        t["sampler"] = t["total"] - t["tokenizer"] - t["tokenise"]
        t.update(from_cache=data.tokenizer.from_cache, train_pairs=len(data.encoded("train")), batches=n_batches)
        print(json.dumps(t), flush=True)


def spawn(cache: str, data_path: str, again: bool) -> list[dict]:
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "--child", cache, "--data", data_path] + (["--again"] if again else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=C.REPO).stdout
    wall = time.perf_counter() - t0
    runs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    runs[0]["process_wall"] = wall
    return runs


def main() -> None:
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        child(sys.argv[i + 1], sys.argv[sys.argv.index("--data") + 1], "--again" in sys.argv)
        return
    args = C.parse_args(__doc__, lambda p: p.add_argument("--data", default=DATA))
    rounds = 1 if args.quick else 3
    settings = {"data": args.data, "config": "configs/multi30k.yaml", "rounds": rounds,
                "cold": "new empty data.cache_dir, fresh process", "warm": "same cache dir, fresh process"}
    info = C.print_header("data_prep: Multi30k preparation, first run vs cached", settings)
    kinds = ["cold (empty cache)", "fresh datamodule, same process", "warm (cached, new process)"]
    res: dict[str, list[dict]] = {k: [] for k in kinds}
    for _ in range(rounds):
        cache = tempfile.mkdtemp(prefix="ablate-bench-cache-")
        try:
            cold, again = spawn(cache, args.data, again=True)
            res[kinds[0]].append(cold)
            res[kinds[1]].append(again)
            res[kinds[2]].append(spawn(cache, args.data, again=False)[0])
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    assert not res[kinds[0]][0]["from_cache"] and res[kinds[2]][0]["from_cache"], "cache not used as expected"
    rows, out = [], {}
    for kind, runs in res.items():
        med = {p: C.median([r[p] for r in runs]) for p in ["imports", *PHASES]}
        med["process_wall"] = C.median([r["process_wall"] for r in runs]) if "process_wall" in runs[0] else float("nan")
        out[kind] = med
        rows.append([kind, med["process_wall"], med["imports"], *(med[p] for p in PHASES)])
    first = res[kinds[0]][0]
    print(f"train pairs {first['train_pairs']}, train batches {first['batches']} (median of {rounds} rounds, seconds)")
    print(C.table(["run", "process wall", "imports+config", "tokenizer", "tokenise", "sampler", "prep total"], rows))
    cold, warm = out[kinds[0]]["total"], out[kinds[2]]["total"]
    print(f"cached / first run (prep total): {warm / cold:.3f} ({cold / warm:.1f}x faster)")
    out["cached_over_first"] = warm / cold
    C.emit("data_prep", info, settings, out)


if __name__ == "__main__":
    main()
