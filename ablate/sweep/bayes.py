"""``method: bayes`` run locally and offline: Bayesian optimisation with a Gaussian process (Optuna's GPSampler).

W&B's bayes method fits a Gaussian process to the finished runs and proposes the next point by expected
improvement; it needs W&B's server. Here Optuna's ``GPSampler`` does the same on this machine. The search
runs in each parameter's quantile space: a point is a u in [0, 1) per searched parameter (and one for the
row, when the sweep has rows), mapped to a value by the parameter's inverse CDF exactly as W&B's random
search maps a uniform draw (:meth:`ablate.sweep.params.Param.ppf`), so log-uniform parameters are searched
on a log scale and integer and categorical ones take their values (a normal one is searched between its
quantiles 1e-6 and 1 - 1e-6). A point runs once per listed seed; its score is the mean over its seeds of
each run's score, as W&B scores runs (:func:`ablate.sweep.queue.run_score`: a finished run's final value, a
stopped run's best, a failed run imputed by ``metric.impute``, the worst by default). A seed drawn from a
distribution is drawn at random for each point, not searched. The model starts after
:data:`STARTUP` random points (W&B's engine fits its Gaussian process from the first points; Optuna's
default of 10 made a 10-point search a random one). The u's travel in plan.json, so a relaunched sweep
tells the optimiser what it already knows before asking for more.

Optuna is chosen over W&B's own engine (the ``sweeps`` package) because that one requires numpy < 2,
which would downgrade the numpy that torch and datasets use.
"""

from __future__ import annotations

import math
import random
from typing import Any

from ablate.stats.design import MINIMIZE
from ablate.sweep.spec import Point, Sweep

ROW = "__row__"
STARTUP = 2  # random points before the Gaussian process proposes
EDGE = 1e-6  # quantiles kept inside (0, 1): an unbounded distribution's ppf is infinite at 0 and 1


class BayesSearch:
    """Proposes points of a sweep, and learns from the score of each."""

    def __init__(self, sweep: Sweep):
        import optuna  # imported here: only bayes sweeps need it

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self.sweep = sweep
        self.rows = sweep.rows or [{"name": ""}]
        self.keys = [k for k, p in sweep.searched.items() if not p.constant and k != "seed"]
        self.seeds = random.Random(sweep.sampler_seed)  # a point's drawn seed, when the sweep draws seeds
        dims = self.keys + ([ROW] if len(self.rows) > 1 else [])
        self.space = {k: optuna.distributions.FloatDistribution(0.0, 1.0) for k in dims}
        direction = "minimize" if sweep.metric["goal"] == MINIMIZE else "maximize"  # Optuna's words
        self.study = optuna.create_study(direction=direction,
                                         sampler=optuna.samplers.GPSampler(seed=sweep.sampler_seed,
                                                                           n_startup_trials=STARTUP))
        self._asked: dict[int, Any] = {}  # trial number -> the trial awaiting its score

    def point(self, u: dict[str, float], seed: int | None) -> Point:
        """The sweep point a choice of quantiles stands for, with one seed."""
        row = self.rows[min(int(u.get(ROW, 0.0) * len(self.rows)), len(self.rows) - 1)]
        sampled = {k: p.ppf(min(max(u.get(k, 0.0), EDGE), 1 - EDGE)) for k, p in self.sweep.searched.items()
                   if k != "seed"}
        if "seed" in self.sweep.searched:
            sampled["seed"] = u["seed"] if "seed" in u else self.sweep.searched["seed"].sample(self.seeds)
        return self.sweep.point(row, sampled, seed)

    def ask(self) -> tuple[int, dict[str, float]]:
        """The number and the quantiles of the next point to try (and its drawn seed, when the sweep draws one)."""
        trial = self.study.ask(self.space)
        self._asked[trial.number] = trial
        u = dict(trial.params)
        if "seed" in self.sweep.searched:
            u["seed"] = self.sweep.searched["seed"].sample(self.seeds)
        return trial.number, u

    def tell(self, number: int, score: float) -> None:
        """The score of point ``number`` (imputed where its runs failed: see :func:`ablate.sweep.queue.run_score`)."""
        self.study.tell(self._asked.pop(number), score)

    def remember(self, u: dict[str, float], score: float) -> None:
        """A point scored before this process started (a relaunched sweep)."""
        import optuna

        u = {k: v for k, v in u.items() if k in self.space}
        if not math.isfinite(score) or set(u) != set(self.space):
            return
        self.study.add_trial(optuna.trial.create_trial(params=u, distributions=self.space, value=score))

    @property
    def best(self) -> float | None:
        done = [t.value for t in self.study.trials if t.value is not None]
        return (min if self.study.direction.name == "MINIMIZE" else max)(done) if done else None
