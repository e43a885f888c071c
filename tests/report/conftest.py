"""A fabricated sweep directory with known numbers: 3 variants, 8 runs, one failed, one pending.

    variant  varied (h, d_k, d_v)  seed 0           seed 1           seed 2
    base     8, 64, 64             1.5 finished     2.0 finished     2.5 finished (final lacks val/loss: best)
    h1       1, 512, 512           2.5 finished     3.0 finished     failed at step 100
    h16      16, 32, 32            pending (no dir) running

Numbers are final val/loss; val/ppl, val/bleu, val/acc, tokens/s and wall time are in RUNS.
Validation curves (metrics.csv) are at steps 100, 200, 300 and end at the final value.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

VARIANTS = {"base": (8, 64, 64), "h1": (1, 512, 512), "h16": (16, 32, 32)}
KEYS = ["model.n_heads", "model.d_k", "model.d_v"]
PARAMETERS = {"base": 65130496, "h1": 65130496, "h16": 65130496}
ERROR = "RuntimeError: loss is nan | at step 100\n(see traceback)"

# (variant, seed): (status, val/loss curve at steps 100, 200, 300, result fields); None = no result.json
RUNS: dict[tuple[str, int], tuple[str, list[float], dict[str, Any]] | None] = {
    ("base", 0): ("finished", [3.0, 2.0, 1.5], dict(ppl=4.0, bleu=20.0, acc=0.75, tps=1000.0, wall=60.0)),
    ("base", 1): ("finished", [3.5, 2.5, 2.0], dict(ppl=8.0, bleu=22.0, acc=0.5, tps=1100.0, wall=70.0)),
    ("base", 2): ("finished", [4.0, 3.0, 2.5], dict(ppl=12.0, bleu=24.0, acc=0.25, tps=1200.0, wall=80.0,
                                                    final_lacks_loss=True)),
    ("h1", 0): ("finished", [4.0, 3.0, 2.5], dict(ppl=12.0, bleu=18.0, acc=0.25, tps=900.0, wall=100.0)),
    ("h1", 1): ("finished", [4.5, 3.5, 3.0], dict(ppl=20.0, bleu=19.0, acc=0.5, tps=1000.0, wall=120.0)),
    ("h1", 2): ("failed", [5.0], dict(error=ERROR)),
    ("h16", 0): None,
    ("h16", 1): ("running", [3.8, 2.9], {}),
}
METRIC_COLUMNS = ["step", "epoch", "train/lr", "train/loss", "train/tokens_per_s", "val/acc", "val/loss", "val/ppl"]


def run_id(variant: str, seed: int) -> str:
    return f"{variant}-s{seed}"


def write_metrics(run_dir: Path, curve: list[float]) -> None:
    """A Lightning-style metrics.csv: train rows every 50 steps, val rows every 100, blanks elsewhere."""
    path = run_dir / "logs" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    rows = []
    for i, loss in enumerate(curve):
        step = 100 * (i + 1)
        rows.append({"step": step - 50, "epoch": 0, "train/lr": 1e-3, "train/loss": loss + 0.4,
                     "train/tokens_per_s": 1000.0})
        rows.append({"step": step, "epoch": 0, "val/loss": loss, "val/ppl": 2.718281828 ** loss, "val/acc": 0.5})
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRIC_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def result_json(status: str, curve: list[float], extra: dict[str, Any], *, bleu: bool) -> dict[str, Any]:
    """A result.json as ``ablate train`` writes it."""
    result: dict[str, Any] = {"status": status, "step": 100 * len(curve), "parameters": 65130496}
    if status == "running":
        return result
    if status == "failed":
        return {**result, "error": extra["error"], "final": {"train/loss": 9.0}, "best": {},
                "tokens_per_s": 500.0, "wall_time_s": 5.0}
    final = {"val/loss": curve[-1], "val/ppl": extra["ppl"], "val/acc": extra["acc"], "train/loss": curve[-1] + 0.3}
    if bleu:
        final["val/bleu"] = extra["bleu"]
    best = {"val/loss": curve[-1], "val/ppl": extra["ppl"]}
    if extra.get("final_lacks_loss"):
        del final["val/loss"], final["val/ppl"]
    return {**result, "final": final, "best": best, "tokens_per_s": extra["tps"], "wall_time_s": extra["wall"]}


def make_sweep(root: Path, *, bleu: bool = True, metric: str = "val/loss", goal: str = "minimize") -> Path:
    """Write the sweep of this module's docstring under ``root`` and return its directory."""
    sweep_dir = root / "sweep"
    runs = []
    for (variant, seed), spec in RUNS.items():
        rid = run_id(variant, seed)
        runs.append({"id": rid, "variant": variant, "seed": seed, "varied": dict(zip(KEYS, VARIANTS[variant])),
                     "run_dir": f"runs/{rid}", "parameters": PARAMETERS[variant], "flops_per_token": 1.2e8})
        if spec is None:
            continue
        status, curve, extra = spec
        run_dir = sweep_dir / "runs" / rid
        write_metrics(run_dir, curve)
        (run_dir / "result.json").write_text(json.dumps(result_json(status, curve, extra, bleu=bleu)))
    plan = {"name": "table3_A", "metric": {"name": metric, "goal": goal}, "base_variant": "base",
            "varied_keys": KEYS, "runs": runs}
    (sweep_dir / "plan.json").write_text(json.dumps(plan, indent=2))
    return sweep_dir


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory) -> Path:
    """The fabricated sweep (BLEU logged, headline metric val/loss, minimize)."""
    return make_sweep(tmp_path_factory.mktemp("report"))


@pytest.fixture
def fabricate(tmp_path):
    """Make a variation of the fabricated sweep: ``fabricate(bleu=False, metric=..., goal=...)``."""
    return lambda **kwargs: make_sweep(tmp_path, **kwargs)


# A sweep like the README's quickstart: a row far from the others (none) and a margin, for the page's layout.
QUICKSTART = {"base": (10, 0.0), "learned": (10, 0.096), "rope": (9, 0.004), "none": (3, 1.6)}  # seeds, mean Δ


def make_verdict_sweep(root: Path, rows: dict[str, tuple[int, float]] = QUICKSTART) -> Path:
    """A sequential sweep of four rows with a margin of 0.1: learned worse, rope equivalent, none far and worse
    (``rows``: variant -> its seeds and mean Δ, the base first).

    Each run's val/loss falls over five validations to 0.9 + its row's Δ + a seed's noise (a fixed generator)."""
    import numpy as np

    from ablate.stats.design import Design, Margin

    rng = np.random.default_rng(29)
    seed_effect = rng.normal(0.0, 0.03, 10)
    sweep_dir, runs = root / "quickstart", []
    for variant, (seeds, delta) in rows.items():
        for seed in range(seeds):
            rid = run_id(variant, seed)
            final = 0.9 + delta + seed_effect[seed] + rng.normal(0.0, 0.02)
            curve = [final + 2.0 * 0.45 ** i for i in range(4)] + [final]
            runs.append({"id": rid, "variant": variant, "seed": seed, "varied": {"model.positional": variant},
                         "run_dir": f"runs/{rid}", "parameters": 105_000})
            write_metrics(sweep_dir / "runs" / rid, curve)
            result = {"status": "finished", "step": 500, "parameters": 105_000, "tokens_per_s": 9000.0,
                      "wall_time_s": 21.0, "final": {"val/loss": final, "val/ppl": float(np.exp(final))},
                      "best": {"val/loss": final}}
            (sweep_dir / "runs" / rid / "result.json").write_text(json.dumps(result))
    plan = {"name": "quickstart", "metric": {"name": "val/loss", "goal": "minimize"}, "base_variant": "base",
            "varied_keys": ["model.positional"], "runs": runs,
            "design": Design(margin=Margin(0.1), first=(0, 1, 2), max_seeds=10).to_json()}
    (sweep_dir / "plan.json").write_text(json.dumps(plan, indent=2))
    return sweep_dir
