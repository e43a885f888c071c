"""How soon ``method: bayes`` beats random search: ablate's local search (Optuna's GPSampler in each parameter's
quantile space, :mod:`ablate.sweep.bayes`) against W&B's random search (each parameter drawn from its
distribution), on a toy objective where the optimum is known, for several numbers of random start-up points
before the Gaussian process proposes (ablate's :data:`STARTUP`, and Optuna's default of 10).

The toy is a quadratic bowl in (x, log10 y), x uniform on [-2, 2], y log-uniform on [0.001, 1], its minimum 0 at
x = 0.7, y = 0.01. For each sampler seed, both searches get the same number of points; a win is a strictly lower
best value. No training: the search itself is what is measured.

    python benchmarks/search.py [--quick]     # --quick: 10 seeds instead of 30
"""

from __future__ import annotations

import math
import random
import tempfile
import textwrap
import time
from pathlib import Path

import _common as C
from ablate.sweep import bayes, load_sweep

TOY = """
method: bayes
run_cap: 20
parameters:
  x: {distribution: uniform, min: -2.0, max: 2.0}
  y: {distribution: log_uniform_values, min: 0.001, max: 1.0}
"""


def bowl(values: dict) -> float:
    return (values["x"] - 0.7) ** 2 + (math.log10(values["y"]) + 2) ** 2


def best_of_bayes(sweep, points: int) -> float:
    search, best = bayes.BayesSearch(sweep), math.inf
    for _ in range(points):
        number, u = search.ask()
        score = bowl(search.point(u, None).values)
        search.tell(number, score)
        best = min(best, score)
    return best


def best_of_random(sweep, points: int, seed: int) -> float:
    rng = random.Random(10_000 + seed)
    return min(bowl({k: p.sample(rng) for k, p in sweep.searched.items()}) for _ in range(points))


def main() -> None:
    args = C.parse_args(__doc__)
    seeds = 10 if args.quick else 30
    settings = {"sampler seeds": seeds, "points": [10, 20], "start-up points": [bayes.STARTUP, 10]}
    info = C.print_header("search: bayes (local Gaussian process) against random search", settings)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "toy.yaml"
        path.write_text(textwrap.dedent(TOY))
        sweep = load_sweep(path)
    rows, results, default = [], {}, bayes.STARTUP
    for startup in (default, 10):
        bayes.STARTUP = startup
        for points in (10, 20):
            start, wins, b_best, r_best = time.perf_counter(), 0, [], []
            for seed in range(seeds):
                sweep.sampler_seed = seed
                b, r = best_of_bayes(sweep, points), best_of_random(sweep, points, seed)
                wins += b < r
                b_best.append(b)
                r_best.append(r)
            seconds = time.perf_counter() - start
            label = f"start-up {startup}{' (ablate)' if startup == default else ' (Optuna default)'}"
            rows.append([label, points, f"{wins}/{seeds}", C.fmt(C.median(b_best)), C.fmt(C.median(r_best)),
                         C.fmt(seconds / seeds, 2)])
            results[f"{startup}/{points}"] = {"wins": wins, "seeds": seeds, "bayes_median_best": C.median(b_best),
                                              "random_median_best": C.median(r_best)}
    bayes.STARTUP = default
    print(C.table(["bayes", "points", "wins over random", "median best, bayes", "median best, random",
                   "s per search"], rows))
    C.emit("search", info, settings, results)


if __name__ == "__main__":
    main()
