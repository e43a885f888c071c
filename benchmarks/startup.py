"""Start-up time of the ``ablate`` command: ``--help``, ``components``, ``describe``, ``sweep --dry-run`` and
``train`` to its first training step, against ``python -c 'import torch'`` in the same run (a command that
needs torch cannot start faster than that; the rest is ablate's own overhead). And the fixed cost a sweep pays per
run: a whole 2-step ``ablate train`` as the sweep's pool starts it, in a fresh interpreter against a process forked
from the warm server (ablate.sweep.warm, started before the rounds).

Each measurement is a fresh subprocess (the installed ``ablate`` script), interleaved, median of
the rounds (one untimed import warms the page cache first). ``ablate train`` runs
configs/default.yaml (what a bare ``ablate train`` runs) into a temporary output_dir, once with the
default logger (W&B, offline without an API key) and once with logger=none, with train.max_steps=2.

How the first step is found: the run's progress (on by default; off a terminal a line per update,
ablate.train.logs.ProgressLines) is read from the child's stdout as it arrives. "Epoch 0:" is printed in
on_train_epoch_start, right before the first batch is fetched: that moment is "to first step". The
"step 1/" line is printed when step 1 has finished: "first step done". (train.max_steps must be positive,
so a max_steps=1 vs 0 difference cannot be taken; the stream is also more direct.)

    python benchmarks/startup.py [--quick] [--threads N (OMP_NUM_THREADS of the children)]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

ABLATE = shutil.which("ablate")
PREFIX = [ABLATE] if ABLATE else [sys.executable, "-m", "ablate.cli"]


THREADS: dict[str, str] = {}  # OMP_NUM_THREADS for the children, from --threads


def timed(cmd: list[str], marks: dict[str, bytes | re.Pattern] | None = None) -> dict[str, float]:
    """Wall time of ``cmd``, and the times at which each mark first appears in its stdout."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_SILENT": "true", **THREADS}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=C.REPO, env=env)
    seen, out = {}, b""
    while chunk := proc.stdout.read1(4096):
        now = time.perf_counter() - t0
        out += chunk
        for name, pattern in (marks or {}).items():
            if name not in seen and (re.search(pattern, out) if isinstance(pattern, re.Pattern) else pattern in out):
                seen[name] = now
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {out[-500:]!r}")
    return {"wall": time.perf_counter() - t0, **seen}


def train_cmd(out_dir: str, *extra: str) -> list[str]:
    return [*PREFIX, "train", str(C.REPO / "configs/default.yaml"), f"output_dir={out_dir}", "train.max_steps=2",
            "trainer.enable_progress_bar=true", *extra]


def pool_run(tmp: str, counter, *, fresh: bool):
    """A whole 2-step run (logger=none) started as the sweep's pool starts one: its wall seconds."""
    from ablate.sweep.children import Children, run_ablate

    def run(r: int) -> dict[str, float]:
        out = f"{tmp}/pool{next(counter)}"
        args = ["train", str(C.REPO / "configs/default.yaml"), f"output_dir={out}", "train.max_steps=2", "logger=none"]
        t0 = time.perf_counter()
        code = run_ablate(args, Path(f"{out}.log"), dict(THREADS), C.REPO, Children(), fresh=fresh)
        if code != 0:
            raise RuntimeError(f"ablate train exited {code}: see {out}.log")
        return {"wall": time.perf_counter() - t0}

    return run


def main() -> None:
    args = C.parse_args(__doc__)
    if args.threads:
        THREADS["OMP_NUM_THREADS"] = str(args.threads)
    rounds = 1 if args.quick else 3
    settings = {"ablate": " ".join(PREFIX), "rounds": rounds, "child threads": args.threads or "default",
                "train config": "configs/default.yaml, max_steps=2",
                "first step": "progress line 'Epoch 0:' on the child's stdout"}
    info = C.print_header("startup: ablate describe / ablate train to first step", settings)
    marks = {"to first step": b"Epoch 0:", "first step done": re.compile(rb"\b1/\d+")}
    tmp = tempfile.mkdtemp(prefix="ablate-bench-startup-")
    counter = iter(range(10**6))

    def train(*extra: str):
        return lambda r: timed(train_cmd(f"{tmp}/run{next(counter)}", *extra), marks)

    contenders = {
        "python -c 'import torch'": lambda r: timed([sys.executable, "-c", "import torch"]),
        "python -c 'import ablate'": lambda r: timed([sys.executable, "-c", "import ablate"]),
        "ablate --help": lambda r: timed([*PREFIX, "--help"]),
        "ablate components": lambda r: timed([*PREFIX, "components"]),
        "ablate describe configs/transformer_base.yaml": lambda r: timed(
            [*PREFIX, "describe", str(C.REPO / "configs/transformer_base.yaml")]),
        "ablate sweep experiments/quickstart.yaml --dry-run": lambda r: timed(
            [*PREFIX, "sweep", str(C.REPO / "experiments/quickstart.yaml"), "--dry-run", "--no-probe",
             "--out", f"{tmp}/dry"]),
        "ablate train logger=none": train("logger=none"),
        "ablate train (W&B offline)": train(),
        "sweep run, fresh interpreter": pool_run(tmp, counter, fresh=True),
        "sweep run, forked warm": pool_run(tmp, counter, fresh=False),
    }
    pool_run(tmp, counter, fresh=False)(0)  # start the warm server outside the rounds
    timed([sys.executable, "-c", "import ablate.data"])  # warm the page cache: no cold first round
    try:
        res = C.interleave(contenders, rounds=rounds, warmup=0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows, out = [], {}
    for name, runs in res.items():
        med = {k: C.median([r[k] for r in runs if k in r]) for k in ("wall", *marks)}
        out[name] = med
        rows.append([name, med["wall"], C.spread([r["wall"] for r in runs]), med["to first step"],
                     med["first step done"]])
    print(C.table(["command", "wall s", "range", "to first step s", "first step done s"], rows))
    torch_s = out["python -c 'import torch'"]["wall"]
    print("\nablate's own overhead (wall minus import torch, same run): " + "; ".join(
        f"{name.split(' configs')[0].split(' experiments')[0]} +{med['wall'] - torch_s:.2f} s"
        for name, med in out.items() if name.startswith("ablate") and "train" not in name))
    fresh, forked = out["sweep run, fresh interpreter"]["wall"], out["sweep run, forked warm"]["wall"]
    print(f"a sweep's run (2 steps, whole): fresh interpreter {fresh:.2f} s, forked warm {forked:.2f} s: "
          f"{fresh - forked:.2f} s saved per run ({fresh / forked:.2f}x)")
    C.emit("startup", info, settings, out)


if __name__ == "__main__":
    main()
