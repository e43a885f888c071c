"""The search methods a sweep file's ``method:`` names (grid, random, bayes), one registered class each.

A method states its own properties, and code elsewhere asks it rather than testing its name: whether its points
cross the rows, ladder and parameters as the factors of one design (``factorial``: a grid), whether it proposes
points as runs finish (``proposes``: a Bayesian search), how it checks a parameter, which points it lists up front,
what a dry run says of its size, and its notes on how ablate reads the file. Adding a method is one class here,
registered with :func:`register`; :data:`METHODS` is looked up by name in :func:`method_named`, the one place a
method's name is read.

The queue a launch fills follows the properties (:func:`ablate.sweep.launch.plan_queue`): the whole plan (a
factorial design, or a capped draw), a stream of draws (open-ended), or a search's proposals. Early stopping
(``early_terminate``: hyperband) is not a method: it composes with any of them (:mod:`ablate.sweep.hyperband`).
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

from ablate.errors import ConfigError
from ablate.sweep.params import GRIDDABLE, Param

METHODS: dict[str, SearchMethod] = {}  # name -> method, in the order its error lists them
DEFAULT_METHOD = "grid"  # a sweep file without ``method:``


def register(cls: type[SearchMethod]) -> type[SearchMethod]:
    """Class decorator: add a method to :data:`METHODS` under its ``name``."""
    METHODS[cls.name] = cls()
    return cls


def method_named(name: Any, source: str | None = None) -> SearchMethod:
    """The registered method called ``name``.

    Raises:
        ConfigError: naming the value and the registered methods, when none is called ``name``.
    """
    if not isinstance(name, str) or name not in METHODS:  # a list or a mapping is no name (nor hashable)
        raise ConfigError("method", name, f"one of {', '.join(METHODS)}", source)
    return METHODS[name]


def _open_ended(chosen: str, first: str) -> str:
    return (f"open-ended: points are {chosen} until Ctrl-C or SIGTERM (finished runs kept, running ones resumed by a "
            f"relaunch), a run reaches metric.target, or --max-runs; the first {first} runs")


class SearchMethod:
    """One way of choosing a sweep's points. ``sweep`` arguments are :class:`ablate.sweep.spec.Sweep`."""

    name: ClassVar[str]
    factorial: ClassVar[bool] = False  # its points are the cells of a grid: rows x ladder x parameters x seeds
    proposes: ClassVar[bool] = False  # it chooses each point once earlier runs have finished

    def check_parameter(self, key: str, param: Param, source: str) -> None:
        """Raise :class:`ConfigError` for a parameter this method cannot search."""

    def points(self, sweep: Any) -> list[Any]:
        """Every point the sweep runs, in order, when they are known before any run (ValueError otherwise)."""
        if sweep.open_ended:
            raise ValueError(f"an open-ended {self.name} sweep has no fixed plan: its points are drawn as runs start")
        return list(itertools.islice(sweep.stream(), sweep.run_cap))

    def total_runs(self, sweep: Any, runs: list[Any]) -> int | None:
        """How many runs the sweep makes (None: open-ended), given the runs planned now."""
        return None if sweep.open_ended else len(runs)

    def count(self, sweep: Any, runs: list[Any]) -> str:
        """The dry run's words for the sweep's size, given the runs planned now."""
        return _open_ended("drawn", str(len(runs))) if sweep.open_ended else f"{len(runs)} runs"

    def notes(self, sweep: Any, backend: str) -> list[str]:
        """How ablate reads this method's part of the file where it differs from W&B: one line each."""
        if not self.factorial and "seed" in sweep.parameters and not sweep.sampled_seed:
            return ["parameters.seed: values are replicates: every point runs once per seed (W&B would draw one "
                    "seed per run); write a distribution (int_uniform) to draw a seed per point"]
        return []


@register
class Grid(SearchMethod):
    """W&B's grid: every combination of the rows, ladder steps and parameter values, each once per listed seed."""

    name = "grid"
    factorial = True

    def check_parameter(self, key: str, param: Param, source: str) -> None:
        if param.distribution not in GRIDDABLE:
            raise ConfigError(f"parameters.{key}", param.distribution, "a constant, values (without probabilities), "
                              "int_uniform or q_uniform: what W&B's grid search takes", source)

    def points(self, sweep: Any) -> list[Any]:
        points = sweep.grid()
        return points[: sweep.run_cap] if sweep.run_cap else points


@register
class Random(SearchMethod):
    """W&B's random search: a row and every parameter drawn anew for each point, from the sampler seed."""

    name = "random"


@register
class Bayes(SearchMethod):
    """Bayesian optimisation, run locally by Optuna's Gaussian process (:mod:`ablate.sweep.bayes`)."""

    name = "bayes"
    proposes = True

    def points(self, sweep: Any) -> list[Any]:
        raise ValueError("a bayes sweep has no fixed plan: its points are chosen as runs finish")

    def total_runs(self, sweep: Any, runs: list[Any]) -> int | None:
        return None if sweep.open_ended else sweep.n_samples() * len(sweep.seeds)

    def count(self, sweep: Any, runs: list[Any]) -> str:
        if sweep.open_ended:
            return _open_ended("chosen as runs finish", "point's")
        return f"up to {self.total_runs(sweep, runs)} runs, chosen as runs finish; the first point's"

    def notes(self, sweep: Any, backend: str) -> list[str]:
        out = super().notes(sweep, backend)
        if sweep.sampled_seed:
            out.append("parameters.seed: drawn at random for each point, not searched by the Gaussian process")
        if sweep.metric.get("impute_while_running", "false") != "false":
            out.append("metric.impute_while_running: ablate's search learns from ended runs only (a running run is "
                       "not scored)")
        if backend != "wandb":
            out.append("method: bayes is searched here by Optuna's Gaussian process, not W&B's engine (--backend wandb "
                       "uses W&B's); a point scores the mean of its seeds' final values")
        return out

