"""Simulated sweeps with runs stopped early by W&B's hyperband rule (ablate's own :class:`Hyperband`), judged by the
report's own code (:func:`ablate.report.build.with_comparisons`), and by the rule before it: survivors only.

A run's quality is a seed effect shared by the row and the base (same seed, same data order) plus its own noise,
larger for the row; its validation loss at step 100 (the band) and at step 200 (the end) both follow that quality,
so a run stopped at the band would have ended badly too. With every run checked at the band, the worse half is
stopped: the row, noisier, loses its bad seeds more often, and its survivors flatter it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ablate.report.collect import RunRow, outcomes
from ablate.runs.status import Status
from ablate.stats.factorial import Factorial
from ablate.report.build import with_comparisons
from ablate.report.table import variant_row
from ablate.stats.compare import Comparison, compare
from ablate.stats.design import Design, Judged
from ablate.sweep.hyperband import Hyperband

METRIC = "val/loss"
BAND = Hyperband(bands=(1,), eta=2.0, strict=True)  # one band: at the first validation, the top half goes on


def _runs(rng: np.random.Generator, name: str, seeds: np.ndarray, shared: np.ndarray, sd: float,
          delta: float) -> list[tuple[str, int, float, float]]:
    quality = shared + rng.normal(0, sd, len(seeds)) + delta
    at_band = 3.0 + quality + rng.normal(0, 0.1, len(seeds))
    at_end = 2.0 + quality + rng.normal(0, 0.1, len(seeds))
    return [(f"{name}-{s}", int(s), float(a), float(b)) for s, a, b in zip(seeds, at_band, at_end)]


def table(rng: np.random.Generator, *, seeds: int, delta: float, row_sd: float = 2.0,
          base_sd: float = 1.0) -> tuple[Comparison, Comparison]:
    """One simulated sweep (base and one row, ``seeds`` seeds each, true Δ ``delta`` at every step): the row's
    comparison as the report makes it, and as the survivors-only rule made it."""
    ids = np.arange(seeds)
    shared = rng.normal(0, 1.0, seeds)
    drawn = {"base": _runs(rng, "base", ids, shared, base_sd, 0.0),
             "row": _runs(rng, "row", ids, shared, row_sd, delta)}
    histories = {rid: [band] for runs in drawn.values() for rid, _, band, _ in runs}
    stop = BAND.to_stop(histories, list(histories), "minimize")
    rows, survivors = [], {}
    for name, runs in drawn.items():
        built = [RunRow(id=rid, variant=name, seed=seed, varied={},
                        status=Status.STOPPED if rid in stop else Status.FINISHED, run_dir=Path(rid),
                        final={} if rid in stop else {METRIC: end},
                        curve=((100, band),) if rid in stop else ((100, band), (200, end)))
                 for rid, seed, band, end in runs]
        rows.append(variant_row(name, built, (METRIC,), is_base=name == "base"))
        survivors[name] = outcomes(built, METRIC)
    judged, _, _, _ = with_comparisons(rows, (Judged(METRIC, "minimize"),), Design(rows=1),
                                       Factorial([], {"base": {}, "row": {}}, "base"))
    before = compare(survivors["row"], survivors["base"], Design(rows=1), "minimize")
    return judged[1].comparison, before


# (seeds, true Δ, the row's sd, the base's sd): a row with no effect, noisier than the base; a row truly worse
SCENARIOS = {"no effect, 10 seeds": (10, 0.0, 2.0, 0.2), "truly worse by 0.5, 20 seeds": (20, 0.5, 3.0, 1.0)}


def rates(rng: np.random.Generator, scenario: str, tables: int) -> dict[str, float]:
    """Over ``tables`` simulated sweeps of a scenario: how often the row is called *better* (false: its true Δ is
    >= 0) by the report and by the survivors-only rule, and how often the report says something false."""
    seeds, delta, row_sd, base_sd = SCENARIOS[scenario]
    calls = [table(rng, seeds=seeds, delta=delta, row_sd=row_sd, base_sd=base_sd) for _ in range(tables)]
    false = ("better", "worse") if delta == 0 else ("better",)
    return {"better": float(np.mean([now.verdict == "better" for now, _ in calls])),
            "better, survivors only": float(np.mean([then.verdict == "better" for _, then in calls])),
            "false": float(np.mean([now.verdict in false for now, _ in calls]))}
