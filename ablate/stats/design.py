"""The design of a comparison, fixed before any run: the family's error, its rows, the margin, the seeds and the looks.

- **Family.** Every verdict of a table together is wrong with probability at most ``alpha``: each of the ``rows``
  comparisons with the base, on each of the ``metrics`` judged metrics, gets ``alpha / (rows · metrics)``
  (Bonferroni: the union bound holds whatever the metrics' correlation, and whenever each row stops), and its
  interval is the inverted test at that level, so "the interval excludes 0" and "better / worse" are one statement.
- **Margin.** The smallest difference that matters, in the metric's units (``0.02``) or relative to the base's
  mean (``"2%"``). With one, an interval inside ±margin says *equivalent*.
- **Seeds.** Every row starts with the sweep's seeds (``first``). A *fixed* design looks once, at the seeds it ran.
  A *sequential* one (``max_seeds``) looks after every seed from the first ones on, adds a seed to the rows still
  undecided (and to the base while any needs it) and stops a row once it is decided or has ``max_seeds``. Its
  looks spend the row's error as a(n) = (alpha / rows) · (n / max_seeds)² (the power family of Kim & DeMets 1987,
  rho = 2): little at the first looks, all of it at the last; :mod:`ablate.stats.boundaries` turns that into
  repeated confidence intervals, valid whenever the sweep stops.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from ablate.errors import ConfigError

ALPHA = 0.05
SPENDING_RHO = 2  # a(n) = row alpha * (n / max_seeds) ** rho
MAX_SEEDS = 100  # the largest seed budget of a sequential design
RELATIVE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*%\s*$")


@dataclass(frozen=True)
class Margin:
    """The smallest difference that matters: ``value`` in the metric's units, or a percentage of the base's mean."""

    value: float
    relative: bool = False

    @classmethod
    def parse(cls, spec: Any, key: str = "decide.margin", source: str | None = None) -> Margin | None:
        """``0.02`` (the metric's units) or ``"2%"`` (of the base's mean); None for None.

        Raises:
            ConfigError: anything else, or a margin that is not positive and finite.
        """
        if spec is None:
            return None
        if isinstance(spec, str) and (match := RELATIVE.match(spec)):
            value, relative = float(match.group(1)), True
        elif isinstance(spec, (int, float)) and not isinstance(spec, bool):
            value, relative = float(spec), False
        else:
            raise ConfigError(key, spec, "a positive number in the metric's units (0.02) or a percentage of the "
                              "base's mean ('2%')", source)
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(key, spec, "a positive, finite margin", source)
        return cls(value, relative)

    def absolute(self, base_mean: float | None) -> float | None:
        """The margin in the metric's units; None for a relative one without a base mean."""
        if not self.relative:
            return self.value
        return None if base_mean is None or not math.isfinite(base_mean) else abs(base_mean) * self.value / 100

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.relative else f"{self.value:g}"


MINIMIZE, MAXIMIZE = "minimize", "maximize"
GOALS = (MINIMIZE, MAXIMIZE)  # a metric's goal as sweep files write it (W&B's words); every package asks here
DEFAULT_GOAL = MINIMIZE  # a metric whose goal is not stated (W&B's default)


@dataclass(frozen=True)
class Judged:
    """A metric every row is judged on: its name as runs log it, its goal, and its own margin (None: none)."""

    name: str
    goal: str = DEFAULT_GOAL
    margin: Margin | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "goal": self.goal, "margin": _margin_json(self.margin)}

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = "plan.json") -> Judged:
        goal = data.get("goal", DEFAULT_GOAL)
        if goal not in GOALS:
            raise ConfigError("metrics.goal", goal, f"one of {', '.join(GOALS)}", source)
        return cls(str(data["name"]), goal, Margin.parse(data.get("margin"), "metrics.margin", source))


def _margin_json(margin: Margin | None) -> float | str | None:
    """A margin as a file holds it: its number, or ``"2%"``."""
    return None if margin is None else str(margin) if margin.relative else margin.value


@dataclass(frozen=True)
class Design:
    """How the rows of a sweep are compared with its base (see the module docstring)."""

    alpha: float = ALPHA
    rows: int = 1
    margin: Margin | None = None
    first: tuple[int, ...] = ()  # the seeds every row starts with, in order
    max_seeds: int | None = None  # sequential: add seeds to undecided rows up to this many; None: fixed
    metrics: int = 1  # the judged metrics: every row is judged on each, and the family counts rows x metrics

    @property
    def sequential(self) -> bool:
        return self.max_seeds is not None

    @property
    def row_alpha(self) -> float:
        """Each comparison's share of the family's error (Bonferroni over rows x metrics)."""
        return self.alpha / (max(1, self.rows) * max(1, self.metrics))

    def judging(self, metric: Judged) -> Design:
        """This design for one of its judged metrics: that metric's margin (the family stays rows x metrics)."""
        return replace(self, margin=metric.margin)

    def seeds(self, n: int) -> list[int]:
        """The first ``n`` seeds of every row: the sweep's own, then the next integers after the largest."""
        extra = n - len(self.first)
        start = max(self.first, default=-1) + 1
        return list(self.first[:n]) + list(range(start, start + max(0, extra)))

    def looks(self, seeds: int) -> list[int]:
        """The seed counts at which a row with ``seeds`` seeds run has been judged: the last alone for a fixed
        design; every count from the first seeds (at least 2) to ``seeds`` for a sequential one."""
        if not self.sequential:
            return [seeds]
        return list(range(max(2, len(self.first)), min(seeds, self.max_seeds) + 1))

    def spent(self, seeds: int) -> float:
        """The row's cumulative error allowed by the look at ``seeds`` seeds."""
        if not self.sequential or seeds >= self.max_seeds:
            return self.row_alpha
        return self.row_alpha * (seeds / self.max_seeds) ** SPENDING_RHO

    def describe(self) -> str:
        """One line for a report's header: the family, each row's level and the seeds."""
        rows = f"{self.rows} row{'s' * (self.rows != 1)}"
        if self.metrics > 1:
            rows += f" x {self.metrics} metrics"
        each = "each row" if self.metrics == 1 else "each row and metric"
        family = f"simultaneous {1 - self.alpha:.0%} over {rows} (Bonferroni: {each} {1 - self.row_alpha:.2%})"
        if not self.sequential:
            return f"{family}; fixed design"
        return (f"{family}; sequential design: seeds {len(self.first)} to {self.max_seeds}, a seed at a time to "
                f"undecided rows, error spent as (n/{self.max_seeds})^{SPENDING_RHO}")

    def to_json(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "rows": self.rows, "margin": _margin_json(self.margin),
                "first": list(self.first), "max_seeds": self.max_seeds, "metrics": self.metrics}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Design:
        return cls(alpha=float(data.get("alpha", ALPHA)), rows=int(data.get("rows", 1)),
                   margin=Margin.parse(data.get("margin"), "design.margin", "plan.json"),
                   first=tuple(int(s) for s in data.get("first") or ()), max_seeds=data.get("max_seeds"),
                   metrics=int(data.get("metrics", 1)))
