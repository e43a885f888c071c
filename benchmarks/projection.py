"""The cost before the launch against the cost after it: a sweep's projected wall time (``ablate sweep``'s probe,
``<sweep>/projection.json``) against its actual elapsed time and its runs' recorded wall times.

The sweep runs for real, in a fresh folder, with probing on (``ABLATE_PROBE=on``). Without ``--quick``: the README's
quickstart (experiments/quickstart.yaml, a sequential design, 12 to 40 runs; its elapsed falls between the fewest's
projection and the most's). With ``--quick``: two of its rows (base, rope) at 100 steps, three seeds, a fixed design
(6 runs): its elapsed is the projection's one number.

With ``--sweep FILE``: that sweep file instead (a Table 3 subset, say), with any ``KEY=VALUE`` overrides after it.

    python benchmarks/projection.py [--quick] [--workers N] [--sweep FILE [KEY=VALUE ...]]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

QUICK = """name: quickstart_quick
method: grid
metric: {name: val/loss, goal: minimize}
base:
  config: %s
  overrides: [train.max_steps=100, train.val_every=50]
rows:
  - {name: base, model.positional: sinusoidal}
  - {name: rope, model.positional: rope}
parameters:
  seed: {values: [0, 1, 2]}
"""


def _add(parser) -> None:
    parser.add_argument("--workers", type=int, default=None, help="the sweep's --workers (default: ablate's)")
    parser.add_argument("--sweep", type=Path, default=None, help="a sweep file to run instead of the quickstart")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE overrides of the sweep's runs (with --sweep)")


def main() -> None:
    args = C.parse_args(__doc__, _add)
    settings = {"sweep": str(args.sweep) if args.sweep else "quickstart, rows base and rope, 100 steps, 3 seeds"
                if args.quick else "experiments/quickstart.yaml", "overrides": args.overrides, "workers": args.workers}
    machine = C.print_header("projected wall time against the actual", settings)
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "sweep.yaml"
        if args.sweep:
            sweep = args.sweep.resolve()
        elif args.quick:
            sweep.write_text(QUICK % (C.REPO / "configs" / "default.yaml"))
        else:
            sweep = C.REPO / "experiments" / "quickstart.yaml"
        out = Path(tmp) / "sweep"
        command = [sys.executable, "-m", "ablate.cli", "sweep", str(sweep), *args.overrides, "--out", str(out)]
        command += ["--workers", str(args.workers)] if args.workers else []
        start = time.time()
        done = subprocess.run(command, cwd=C.REPO, env={**os.environ, "ABLATE_PROBE": "on"}, capture_output=True,
                              text=True)
        total = time.time() - start
        if done.returncode != 0:
            sys.exit(f"the sweep failed ({done.returncode}): {done.stderr[-2000:]}")
        p = json.loads((out / "projection.json").read_text())
        plan = json.loads((out / "plan.json").read_text())["runs"]
        ran = [(run["variant"], out / run["run_dir"] / "result.json") for run in plan]
        ran = [(variant, path) for variant, path in ran if path.is_file()]
        results = [(variant, json.loads(path.read_text())) for variant, path in ran]
        ended = max(path.stat().st_mtime for _, path in ran)
    elapsed = ended - p["launched_at"]
    own = sum(r["wall_time_s"] for _, r in results)
    evaluate = sum((r.get("decode") or {}).get("seconds", 0.0) for _, r in results)
    shapes = p["shapes"]
    projected_own = sum(sum(v for k, v in shapes[variant].items() if k != "evaluate") for variant, _ in results)
    projected_evaluate = sum(shapes[variant]["evaluate"] for variant, _ in results)
    most = p.get("most_seconds")
    rows = [["wall time, the runs to start", p["runs"], C.fmt(p["seconds"]), "", ""],
            *([["wall time, the most runs", p["most_runs"], C.fmt(most), "", ""]] if most else []),
            ["elapsed since the launch", len(results), "", C.fmt(elapsed),
             C.fmt(elapsed / p["seconds"]) if not most else
             ("within" if p["seconds"] <= elapsed <= most else "outside") + " the range"],
            ["the runs' own time (run-seconds)", len(results), C.fmt(projected_own), C.fmt(own),
             C.fmt(own / projected_own)],
            ["evaluate (run-seconds)", len(results), C.fmt(projected_evaluate), C.fmt(evaluate), ""]]
    print(C.table(["what", "runs", "projected s", "actual s", "actual / projected"], rows))
    print(f"\nprobe: {len(shapes)} shapes in {p['probe_seconds']:.1f} s; the whole command {total:.0f} s; "
          f"{p['workers']} workers on {p['device']}")
    C.emit("projection", machine, settings, {"projection": p, "elapsed_s": elapsed, "runs": len(results),
                                             "own_s": own, "projected_own_s": projected_own, "evaluate_s": evaluate,
                                             "command_s": total})


if __name__ == "__main__":
    main()
