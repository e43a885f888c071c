"""Simulated sweeps where the truth is known: every row's runs against the base's, seed by seed.

A "sweep" here is B independent repetitions (numpy's leading axis) of one table: the base and R rows, each with N
seeds. Paired designs share a seed effect between the row and the base (same data order and initial weights make
seeds correlated), so per-seed differences have a smaller spread than either side.
"""

from __future__ import annotations

import numpy as np

SIMS = 20_000  # simulated sweeps per check: the Monte Carlo standard error of a 5% rate is 0.0015


def mc_se(p: float, sims: int = SIMS) -> float:
    """The Monte Carlo standard error of a rate p estimated from ``sims`` simulations."""
    return float(np.sqrt(p * (1 - p) / sims))


def sweep(rng: np.random.Generator, *, sims: int = SIMS, rows: int = 1, seeds: int = 5, delta=0.0,
          sd: float = 1.0, rho: float = 0.8) -> tuple[np.ndarray, list[np.ndarray]]:
    """The base's values (sims, seeds) and each row's, with true differences ``delta`` (one per row, or one for
    all) and a seed effect shared by every side (correlation ``rho`` between a row and the base on one seed)."""
    deltas = np.broadcast_to(np.asarray(delta, float), (rows,))
    seed_effect = rng.normal(0, sd * np.sqrt(rho), (sims, seeds))
    noise = sd * np.sqrt(1 - rho)
    base = seed_effect + rng.normal(0, noise, (sims, seeds))
    return base, [seed_effect + d + rng.normal(0, noise, (sims, seeds)) for d in deltas]
