"""A sweep's ``decide:`` key: how its rows are compared with the base (:mod:`ablate.stats.design`).

    decide:
      margin: 0.05        # the smallest Δ that matters, in the metric's units, or "2%" of the base's mean
      max_seeds: 10       # sequential: add seeds to undecided rows, up to 10 each (ablate sweep --max-seeds)
      alpha: 0.05         # every verdict of the table together is wrong with at most this probability
      metrics:            # judge every row on several metrics (instead of margin: each its own)
        - {name: val/loss, goal: minimize, margin: 0.05}   # the sweep's metric, first
        - {name: test/bleu, goal: maximize, margin: 0.5}   # after training (the sweep's evaluate:)

The family's error is shared over rows x metrics (Bonferroni, :mod:`ablate.stats.design`); a sequential design adds
seeds to a row until every metric of it is decided or it has ``max_seeds``.

Without ``max_seeds`` the design is fixed: each row runs the sweep's seeds and is judged once. A sequential design
needs a grid sweep whose seeds are listed (``parameters.seed: {values: [0, 1, 2]}``: the first seeds of every row)
and no early termination; that needs the whole sweep, so the sweep reader checks it
(:func:`ablate.sweep.read.check_sequential`). This module reads the ``decide:`` key alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ablate.errors import ConfigError
from ablate.runs.metrics import allowed, known
from ablate.stats.design import ALPHA, DEFAULT_GOAL, GOALS, MAX_SEEDS, Judged, Margin

KEYS = ("margin", "max_seeds", "alpha", "metrics")
METRIC_KEYS = ("name", "goal", "margin")


@dataclass(frozen=True)
class Decide:
    """The parsed ``decide:`` key."""

    alpha: float = ALPHA
    margin: Margin | None = None
    max_seeds: int | None = None
    metrics: tuple[Judged, ...] = ()  # the judged metrics as listed (): the sweep's metric alone, at ``margin``

    def most_runs(self, variants: int) -> int | None:
        """The runs a sequential design trains at most: every variant at ``max_seeds`` (None for a fixed design)."""
        return variants * self.max_seeds if self.max_seeds else None


def parse_decide(spec: Any, source: str) -> Decide:
    """Parse ``decide:``.

    Raises:
        ConfigError: an unknown key, a margin that is not positive, ``max_seeds`` not an integer in 2..100,
            ``alpha`` outside (0, 0.5].
    """
    if spec is None:
        return Decide()
    if not isinstance(spec, dict) or set(spec) - set(KEYS):
        raise ConfigError("decide", spec, "a mapping with margin, max_seeds, alpha and metrics (each optional)",
                          source)
    alpha = spec.get("alpha", ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 0.5:
        raise ConfigError("decide.alpha", alpha, "a number in (0, 0.5]: the family's error", source)
    metrics = parse_metrics(spec.get("metrics"), source)
    if metrics and spec.get("margin") is not None:
        raise ConfigError("decide.margin", spec["margin"], "no margin beside decide.metrics: give each metric its "
                          "own (decide.metrics[i].margin)", source)
    return Decide(float(alpha), Margin.parse(spec.get("margin"), "decide.margin", source),
                  check_max_seeds(spec.get("max_seeds"), "decide.max_seeds", source), metrics)


def parse_metrics(spec: Any, source: str) -> tuple[Judged, ...]:
    """``decide.metrics``: a list of {name, goal, margin}, each a metric runs log, each once; () for None.

    Raises:
        ConfigError: not a non-empty list of such mappings, an unknown name or goal, a name twice, a bad margin.
    """
    if spec is None:
        return ()
    if not isinstance(spec, list) or not spec:
        raise ConfigError("decide.metrics", spec, "a list of {name, goal, margin}: the metrics every row is judged "
                          "on", source)
    out: list[Judged] = []
    for i, entry in enumerate(spec):
        key = f"decide.metrics[{i}]"
        if not isinstance(entry, dict) or "name" not in entry or set(entry) - set(METRIC_KEYS):
            raise ConfigError(key, entry, "a mapping {name, goal, margin} (goal and margin optional)", source)
        name, goal = entry["name"], entry.get("goal", DEFAULT_GOAL)
        if not isinstance(name, str) or not known(name):
            raise ConfigError(f"{key}.name", name, allowed(str(name)), source)
        if goal not in GOALS:
            raise ConfigError(f"{key}.goal", goal, f"one of {', '.join(GOALS)}", source)
        if any(j.name == name for j in out):
            raise ConfigError(f"{key}.name", name, "a metric not listed before: each is judged once", source)
        out.append(Judged(name, goal, Margin.parse(entry.get("margin"), f"{key}.margin", source)))
    return tuple(out)


def check_max_seeds(value: Any, key: str, source: str) -> int | None:
    """``max_seeds`` as an integer in 2..MAX_SEEDS (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_SEEDS:
        raise ConfigError(key, value, f"an integer from 2 to {MAX_SEEDS}: the most seeds a row gets", source)
    return value
