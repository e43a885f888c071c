"""How close the quickstart's sequential sweep comes to its compute floor, with seeds started ahead of the looks and
without (``ABLATE_SPECULATE=0``: each look a barrier), one after the other in the same run.

The quickstart (experiments/quickstart.yaml: 4 rows, 3 seeds, then a seed at a time to the rows still undecided, up
to 10; 2 workers, warm runs) to its report. Its floor, measured in the same sweep: the sum of its runs' own wall
times (``wall_time_s`` of each result.json) / workers, what the sweep would take if no worker ever waited. For each:
wall seconds, runs trained (and those a verdict reads: seeds after a row's deciding look, started ahead, read by
none), the floor and wall / floor. The verdicts must agree: a seed started ahead never changes one.

    python benchmarks/speculate.py [--quick] [--workers 2]
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import _common as C
import yaml
from decide import SWEEP, quickstart_spec, run_sweep


def own_seconds(sweep_dir: Path) -> list[float]:
    """The wall seconds each of the sweep's runs recorded (result.json's ``wall_time_s``)."""
    plan = json.loads((sweep_dir / "plan.json").read_text())
    results = [json.loads((sweep_dir / r["run_dir"] / "result.json").read_text()) for r in plan["runs"]]
    return [float(r["wall_time_s"]) for r in results if r.get("wall_time_s") is not None]


def read_runs(out: dict, max_seeds: int) -> int:
    """The runs the verdicts read: each row's seeds up to its deciding look (all of them, undecided), and the
    base's up to the most of those."""
    seeds = [at or max_seeds for at in out["decided_at"].values()]
    return sum(seeds) + max(seeds, default=0)


def main() -> None:
    args = C.parse_args(__doc__, lambda p: p.add_argument("--workers", type=int, default=2))
    spec = quickstart_spec(args.quick)
    tmp = Path(tempfile.mkdtemp(prefix="ablate-bench-speculate-"))
    path = tmp / "quickstart.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    settings = {"sweep": str(SWEEP.relative_to(C.REPO)), "workers": args.workers, "quick": args.quick,
                "decide": spec.get("decide"), "seeds": spec["parameters"]["seed"]}
    info = C.print_header("speculate: the sequential quickstart's wall time over its floor, with and without seeds "
                          "started ahead of the looks", settings)
    out = {}
    try:
        for name, value in (("barrier", "0"), ("speculative", "1")):
            sweep_dir = tmp / name
            r = run_sweep(path, sweep_dir, args.workers, True, {"ABLATE_SPECULATE": value})
            seconds = own_seconds(sweep_dir)
            r.update(run_s=sum(seconds), floor_s=sum(seconds) / args.workers, read=read_runs(r, spec["decide"]
                                                                                                   ["max_seeds"]))
            r["over_floor"] = r["wall_s"] / r["floor_s"]
            out[name] = r
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(C.table(["contender", "wall s", "runs (read)", "Σ run wall s", "floor s", "wall / floor",
                   "verdicts (decided at)"],
                  [[name, r["wall_s"], f"{r['runs']} ({r['read']})", r["run_s"], r["floor_s"],
                    f"{r['over_floor']:.2f}x",
                    ", ".join(f"{v}: {r['verdicts'][v]} ({r['decided_at'][v] or '-'})" for v in r["verdicts"])]
                   for name, r in out.items()]))
    same = out["barrier"]["verdicts"] == out["speculative"]["verdicts"]
    print(f"\nspeculative: {out['barrier']['wall_s']:.0f} s -> {out['speculative']['wall_s']:.0f} s; "
          f"{out['barrier']['over_floor']:.2f}x -> {out['speculative']['over_floor']:.2f}x its floor; "
          f"verdicts {'the same' if same else 'DIFFER'}")
    C.emit("speculate", info, settings, out)


if __name__ == "__main__":
    main()
