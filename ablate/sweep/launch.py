"""``ablate sweep``: plan, print (``--dry-run``) or run, then report."""

from __future__ import annotations

import shutil
from pathlib import Path

from omegaconf import OmegaConf

from ablate.sweep.plan import PlannedRun, default_sweep_dir, plan_sweep, run_config, write_plan
from ablate.sweep.runner import Outcome, execute
from ablate.sweep.spec import Sweep


def format_matrix(sweep: Sweep, runs: list[PlannedRun]) -> str:
    """The run matrix: one row per run with its varied values, parameter count and FLOPs per token."""
    keys = list(runs[0].varied) if runs else []
    header = ["run", "variant", "seed", *keys, "params", "FLOPs/token"]
    rows = [[r.id, r.variant, str(r.seed), *(str(r.varied[k]) for k in keys), f"{r.parameters / 1e6:.2f}M",
             f"{r.flops_per_token:.3g}"] for r in runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    title = f"sweep {sweep.name}: {len(runs)} runs, method {sweep.method}, metric {sweep.metric['name']} ({sweep.metric['goal']})"
    return "\n".join([title, *lines])


def launch(sweep: Sweep, *, extra: list[str], sweep_dir: Path | None, workers: int, dry_run: bool,
           retry_failed: bool, progress: bool = True) -> tuple[Path, list[PlannedRun], Outcome | None]:
    """Plan every run (validating each config), then run the pending ones unless ``dry_run``."""
    sweep_dir = sweep_dir or default_sweep_dir(sweep)
    runs = plan_sweep(sweep, sweep_dir, extra)
    if dry_run:
        return sweep_dir, runs, None
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if sweep.path.resolve() != (sweep_dir / "sweep.yaml").resolve():
        shutil.copyfile(sweep.path, sweep_dir / "sweep.yaml")
    write_plan(sweep, sweep_dir, runs)
    configs = {r.id: OmegaConf.to_yaml(run_config(sweep, r.overrides, sweep_dir / r.run_dir, extra)) for r in runs}
    outcome = execute(runs, configs, sweep_dir, workers=workers, retry_failed=retry_failed, progress=progress)
    return sweep_dir, runs, outcome
