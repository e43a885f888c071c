"""Sweeps: W&B-format sweep files expanded locally, planned, run by a worker pool, resumed."""

from ablate.sweep.plan import PlannedRun, default_sweep_dir, plan_sweep, run_config, write_plan
from ablate.sweep.read import load_sweep
from ablate.sweep.spec import Sweep

__all__ = ["PlannedRun", "Sweep", "default_sweep_dir", "load_sweep", "plan_sweep", "run_config", "write_plan"]
