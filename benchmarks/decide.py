"""Time to a decision: the quickstart sweep (experiments/quickstart.yaml) run to its report, three ways, one after
the other in the same run:

- **fixed, fresh**: its first seeds only (no ``decide.max_seeds``), each run a fresh interpreter: the quickstart as
  it was before the sequential design and the warm worker;
- **sequential, fresh**: seeds added to undecided rows up to the file's ``max_seeds``, fresh interpreters;
- **sequential, warm**: the same, each run forked from the warm server (what ``ablate sweep`` does now).

For each: wall seconds from launch to report, runs trained, and how many rows the report decides (better, worse or
equivalent) under the file's margin. Wall times depend on the machine and its load; the ratio of the two
sequential contenders (same runs, same seeds) is the warm worker's saving.

    python benchmarks/decide.py [--quick] [--workers 2]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C
import yaml

SWEEP = C.REPO / "experiments" / "quickstart.yaml"
DECIDED = ("better", "worse", "equivalent")


def run_sweep(path: Path, out: Path, workers: int, warm: bool, env: dict[str, str] | None = None) -> dict:
    """``ablate sweep PATH`` in a child process (``env``: more of its environment), timed to its report."""
    from ablate.report import build_report

    env = {**os.environ, "ABLATE_WARM": "1" if warm else "0", "WANDB_SILENT": "true", **(env or {})}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ablate.cli", "sweep", str(path), "--out", str(out), "--workers",
                           str(workers)], cwd=C.REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"ablate sweep exited {proc.returncode}: {proc.stderr[-1500:]}")
    report = build_report(out)
    rows = [v for v in report.variants if not v.is_base]
    return {"wall_s": wall, "runs": len(report.runs), "rows": len(rows),
            "decided": sum(v.comparison is not None and v.comparison.verdict in DECIDED for v in rows),
            "verdicts": {v.name: v.comparison.verdict if v.comparison else None for v in rows},
            "decided_at": {v.name: v.comparison.decided_at if v.comparison else None for v in rows}}


def quickstart_spec(quick: bool) -> dict:
    """The quickstart's sweep file as a mapping; ``quick``: 100 steps a run instead of its own."""
    spec = yaml.safe_load(SWEEP.read_text())
    if quick:
        spec["base"]["overrides"] = [o for o in spec["base"]["overrides"] if not o.startswith("train.max_steps")]
        spec["base"]["overrides"].append("train.max_steps=100")
    return spec


def main() -> None:
    args = C.parse_args(__doc__, lambda p: p.add_argument("--workers", type=int, default=2))
    spec = quickstart_spec(args.quick)
    fixed = {**spec, "decide": {k: v for k, v in spec.get("decide", {}).items() if k != "max_seeds"}}
    tmp = Path(tempfile.mkdtemp(prefix="ablate-bench-decide-"))
    files = {}
    for name, content in (("fixed", fixed), ("sequential", spec)):
        files[name] = tmp / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump(content, sort_keys=False))
    settings = {"sweep": str(SWEEP.relative_to(C.REPO)), "workers": args.workers, "quick": args.quick,
                "decide": spec.get("decide"), "seeds": spec["parameters"]["seed"]}
    info = C.print_header("decide: the quickstart to a decision, fixed vs sequential, fresh vs warm runs", settings)
    contenders = {"fixed, fresh": ("fixed", False), "sequential, fresh": ("sequential", False),
                  "sequential, warm": ("sequential", True)}
    out = {}
    try:
        for name, (kind, warm) in contenders.items():
            out[name] = run_sweep(files[kind], tmp / name.replace(", ", "-"), args.workers, warm)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(C.table(["contender", "wall s", "runs", "rows decided", "verdicts (decided at)"],
                  [[name, r["wall_s"], r["runs"], f"{r['decided']}/{r['rows']}",
                    ", ".join(f"{v}: {r['verdicts'][v]} ({r['decided_at'][v] or '-'})" for v in r["verdicts"])]
                   for name, r in out.items()]))
    a, b = out["sequential, fresh"]["wall_s"], out["sequential, warm"]["wall_s"]
    print(f"\nwarm worker: {a:.0f} s -> {b:.0f} s for the same {out['sequential, warm']['runs']} runs ({a / b:.2f}x)")
    C.emit("decide", info, settings, out)


if __name__ == "__main__":
    main()
