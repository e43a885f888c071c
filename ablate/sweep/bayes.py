"""``method: bayes`` run locally and offline: Bayesian optimisation with a Gaussian process (Optuna's GPSampler).

W&B's bayes method fits a Gaussian process to the finished runs and proposes the next point by expected
improvement; it needs W&B's server. Here Optuna's ``GPSampler`` does the same on this machine. The search
runs in each parameter's quantile space: a point is a u in [0, 1) per searched parameter (and one for the
row, when the sweep has rows), mapped to a value by the parameter's inverse CDF exactly as W&B's random
search maps a uniform draw (:meth:`ablate.sweep.params.Param.ppf`), so log-uniform parameters are searched
on a log scale and integer and categorical ones take their values. A point runs once per seed; its score
is the mean of the seeds' final metric. The u's travel in plan.json, so a relaunched sweep tells the
optimiser what it already knows before asking for more.

Optuna is chosen over W&B's own engine (the ``sweeps`` package) because that one requires numpy < 2,
which would downgrade the numpy that torch and datasets use.
"""

from __future__ import annotations

import math
from typing import Any

from ablate.sweep.spec import Point, Sweep

ROW = "__row__"


class BayesSearch:
    """Proposes points of a sweep, and learns from the score of each."""

    def __init__(self, sweep: Sweep):
        import optuna  # imported here: only bayes sweeps need it

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self.sweep = sweep
        self.rows = sweep.rows or [{"name": ""}]
        self.keys = [k for k, p in sweep.searched.items() if not p.constant]
        dims = self.keys + ([ROW] if len(self.rows) > 1 else [])
        self.space = {k: optuna.distributions.FloatDistribution(0.0, 1.0) for k in dims}
        direction = "minimize" if sweep.metric["goal"] == "minimize" else "maximize"
        self.study = optuna.create_study(direction=direction,
                                         sampler=optuna.samplers.GPSampler(seed=sweep.sampler_seed))
        self._asked: dict[int, Any] = {}  # trial number -> the trial awaiting its score

    def point(self, u: dict[str, float], seed: int | None) -> Point:
        """The sweep point a choice of quantiles stands for, with one seed."""
        row = self.rows[min(int(u.get(ROW, 0.0) * len(self.rows)), len(self.rows) - 1)]
        sampled = {k: (p.ppf(u[k]) if k in u else p.ppf(0.0)) for k, p in self.sweep.searched.items()}
        return self.sweep.point(row, sampled, seed)

    def ask(self) -> tuple[int, dict[str, float]]:
        """The number and the quantiles of the next point to try."""
        trial = self.study.ask(self.space)
        self._asked[trial.number] = trial
        return trial.number, dict(trial.params)

    def tell(self, number: int, score: float | None) -> None:
        """The score of point ``number`` (None: every run of it failed)."""
        import optuna

        trial = self._asked.pop(number)
        if score is None or not math.isfinite(score):
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, score)

    def remember(self, u: dict[str, float], score: float | None) -> None:
        """A point scored before this process started (a relaunched sweep)."""
        import optuna

        if score is None or not math.isfinite(score) or set(u) != set(self.space):
            return
        self.study.add_trial(optuna.trial.create_trial(params=dict(u), distributions=self.space, value=score))

    @property
    def best(self) -> float | None:
        done = [t.value for t in self.study.trials if t.value is not None]
        return (min if self.study.direction.name == "MINIMIZE" else max)(done) if done else None
