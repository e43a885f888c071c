"""Fault injection: kill a sweep anywhere, damage its files, run two at once, and check that the relaunch gives the
uninterrupted answer or a clear one-line refusal.

Kinds of fault, each on every kind of sweep (a tiny two-variant, two-seed sweep; d_model 32, a few steps): its runs
alone (``solo``), or each variant's seeds as one seed array (``fused``, the GPU's default), with a fixed design or
a sequential one (``sequential``, ``sequential-fused``). A kind is ``<fault>-<sweep>``:

- ``kill``: SIGKILL to the sweep's whole process group once a run has logged a randomly chosen validation step (an
  event, read from its ``progress.json``), then the same command;
- ``term``: SIGTERM to the sweep process alone at such a point (a scheduler's preemption): exit 143, then the
  relaunch command the sweep printed;
- ``damaged-result``, ``damaged-plan``, ``damaged-array-ckpt`` (fused sweeps): a killed sweep whose ``result.json``,
  ``plan.json`` or array checkpoint is then cut short, then the same command;
- ``two-launchers``: two launches of one sweep at once.

A trial survives when the relaunch exits 0 and every run's status, step, final and best values, validation history
and logged rows equal the uninterrupted sweep's, or when it is refused with exit 2 and one line on stderr. The
random points come from ``--seed``; the uninterrupted sweeps are run once per kind of sweep.

    python benchmarks/faults.py [--trials 1] [--seed 0] [--kinds kill-solo,term-fused,...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ablate.runs.files import read_metrics  # noqa: E402

STEPS, EVERY = 12, 3
BASE = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_layers=1", "data.batch_size=16",
        "data.task_args={n_train: 256, n_val: 32}", f"train.max_steps={STEPS}", f"train.val_every={EVERY}",
        "train.log_every=3", "trainer.enable_progress_bar=false", "logger=none", "trainer.threads=1"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
SWEEPS = {"solo": ["--fuse", "off"], "fused": ["--fuse", "on"], "sequential": ["--fuse", "off"],
          "sequential-fused": ["--fuse", "on"]}
FAULTS = ("kill", "term", "damaged-result", "damaged-plan", "damaged-array-ckpt", "two-launchers")
# every fault on every kind of sweep; an array checkpoint only where seeds train as arrays
KINDS = {f"{fault}-{sweep}": sweep for fault in FAULTS for sweep in SWEEPS
         if fault != "damaged-array-ckpt" or "fused" in sweep}


def sweep_file(folder: Path, kind: str) -> Path:
    """The sweep of ``kind``: two variants, two seeds (a sequential design: up to three, a margin none decides)."""
    decide = "decide: {max_seeds: 3, margin: 0.000001}\n" if kind.startswith("sequential") else ""
    path = folder / f"{kind}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: {kind}
        base: {{config: {REPO / 'configs' / 'default.yaml'}, overrides: {json.dumps(BASE)}}}
        rows:
          - {{name: base}}
          - {{name: wide, model.d_ff: 96}}
        parameters:
          seed: {{values: [0, 1]}}
        """) + decide)
    return path


def ablate(args: list[str], cwd: Path, background: bool = False):
    cmd = [sys.executable, "-m", "ablate.cli", *args]
    if background:
        return subprocess.Popen(cmd, cwd=cwd, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=1200)


def record(sweep_dir: Path) -> dict:
    """What must not depend on a fault: each run's status, step, final, best, history and logged rows (tokens/s, a
    measured time, left out)."""
    out = {}
    for run in json.loads((sweep_dir / "plan.json").read_text())["runs"]:
        run_dir = sweep_dir / run["run_dir"]
        result = json.loads((run_dir / "result.json").read_text())
        progress = run_dir / "progress.json"
        result["final"] = {k: v for k, v in (result.get("final") or {}).items() if "tokens_per_s" not in k}
        out[run["id"]] = {"result": {k: result.get(k) for k in ("status", "step", "final", "best")},
                          "history": json.loads(progress.read_text())["history"] if progress.is_file() else None,
                          "rows": [{k: v for k, v in r.items() if "tokens_per_s" not in k}
                                   for r in read_metrics(run_dir)]}
    return out


def reached(sweep_dir: Path, step: int) -> bool:
    """Whether some run has logged validation step ``step`` (its progress.json)."""
    for path in sweep_dir.glob("runs/*/progress.json"):
        try:
            if json.loads(path.read_text())["step"] >= step:
                return True
        except (ValueError, KeyError, OSError):
            continue
    return False


def stop_at(proc: subprocess.Popen, sweep_dir: Path, step: int, signum: int, group: bool) -> str:
    """Send ``signum`` once a run has logged ``step``, wait for the sweep; its stderr."""
    while not reached(sweep_dir, step) and proc.poll() is None:
        time.sleep(0.02)
    if proc.poll() is None:
        (os.killpg if group else os.kill)(proc.pid, signum)
    _, err = proc.communicate()
    if group:  # its runs too: wait until none holds its lock
        import fcntl

        for lock in sweep_dir.glob("runs/*/.lock"):
            fd = os.open(lock, os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.close(fd)
    return err


def verdict(out: subprocess.CompletedProcess, sweep_dir: Path, expected: dict) -> tuple[bool, str]:
    """Whether a relaunch survived, and how."""
    lines = out.stderr.strip().splitlines()
    if out.returncode == 2 and len(lines) == 1:
        return True, f"refused: {lines[0][:100]}"
    if out.returncode != 0:
        return False, f"exit {out.returncode}: {lines[-1][:120] if lines else ''}"
    got = record(sweep_dir)
    wrong = sorted({f for k in expected for f in expected[k] if got.get(k, {}).get(f) != expected[k][f]})
    return (not wrong), "same answer" if not wrong else f"differs in {', '.join(wrong)}"


def trial(kind: str, work: Path, sweeps: dict, expected: dict, rng: random.Random, k: int) -> tuple[bool, str]:
    sweep = KINDS[kind]
    fault = kind[: -len(sweep) - 1]
    path, options = sweeps[sweep], SWEEPS[sweep]
    out = ["--out", f"{kind}-{k}"]
    sweep_dir = work / f"{kind}-{k}"
    step = rng.choice(range(EVERY, STEPS, EVERY))
    if fault == "two-launchers":
        procs = [ablate(["sweep", str(path), *options, *out], work, background=True) for _ in range(2)]
        codes = [p.wait() for p in procs]
        if codes != [0, 0]:
            return False, f"exits {codes}"
        return verdict(subprocess.CompletedProcess([], 0, "", ""), sweep_dir, expected[sweep])
    proc = ablate(["sweep", str(path), *options, "--workers", "1", *out], work, background=True)
    if fault == "term":
        err = stop_at(proc, sweep_dir, step, signal.SIGTERM, group=False)
        last = err.strip().splitlines()[-1] if err.strip() else ""
        if proc.returncode != 128 + signal.SIGTERM or "with: " not in last:
            return False, f"SIGTERM: exit {proc.returncode}, last line {last[:100]!r}"
        words = shlex.split(last.split("with: ", 1)[1])
        return verdict(ablate(words[1:], work), sweep_dir, expected[sweep])
    stop_at(proc, sweep_dir, step, signal.SIGKILL, group=True)
    if fault == "damaged-result":
        results = sorted(sweep_dir.glob("runs/*/result.json"))
        victim = rng.choice(results)
        victim.write_bytes(victim.read_bytes()[: rng.randrange(1, max(2, victim.stat().st_size))])
    elif fault == "damaged-plan":
        plan = sweep_dir / "plan.json"
        plan.write_bytes(plan.read_bytes()[: rng.randrange(1, plan.stat().st_size)])
    elif fault == "damaged-array-ckpt":
        ckpts = sorted(sweep_dir.glob("arrays/*/last.ckpt"))
        if ckpts:
            victim = rng.choice(ckpts)
            victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    return verdict(ablate(["sweep", str(path), *options, "--workers", rng.choice(["1", "2", "3"]), *out], work),
                   sweep_dir, expected[sweep])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--trials", type=int, default=1, help="trials per kind of fault")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, of: " + ", ".join(KINDS))
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="ablate-faults-") as tmp:
        work = Path(tmp)
        needed = sorted({KINDS[k] for k in kinds})
        sweeps = {s: sweep_file(work, s) for s in needed}
        expected, start = {}, time.time()
        for s in needed:
            out = ablate(["sweep", str(sweeps[s]), *SWEEPS[s], "--workers", "1", "--out", f"whole-{s}"], work)
            if out.returncode != 0:
                sys.exit(f"the uninterrupted {s} sweep failed: {out.stderr[-1000:]}")
            expected[s] = record(work / f"whole-{s}")
        print(f"uninterrupted sweeps: {', '.join(needed)} ({time.time() - start:.0f} s)")
        print(f"{'kind':<20} {'trials':>6} {'survived':>8}  outcomes")
        for kind in kinds:
            outcomes = [trial(kind, work, sweeps, expected, rng, k) for k in range(args.trials)]
            print(f"{kind:<20} {len(outcomes):>6} {sum(ok for ok, _ in outcomes):>8}  "
                  + "; ".join(how for _, how in outcomes), flush=True)
        print(f"total {time.time() - start:.0f} s, seed {args.seed}")


if __name__ == "__main__":
    main()
