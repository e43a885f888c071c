"""The comparison table of a sweep, one row per variant, like Table 3 of the paper.

Every number of a variant is a mean over the seeds that *finished*, with the sample standard
deviation (n - 1 in the denominator; none for a single run) and the count n; in a sequential design, over the seeds
its verdicts read (:func:`ablate.report.build.read_seeds`), its runs beyond them set apart as ``ahead``. A run's
value of a metric is its final value, falling back to its best. A variant with no finished run has no numbers at all
(it is ``pending``, or ``failed`` when every run failed), never zeros.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.runs.outcome import RunRow
from ablate.runs.status import SETTLED, Status
from ablate.stats.factorial import Contrast
from ablate.stats.compare import Comparison
from ablate.stats.design import Design, Judged
from ablate.runs.metrics import TEST_BLEU as METRIC_TEST_BLEU, VAL_BLEU, VAL_LOSS, VAL_PPL

TABLE_METRICS = (VAL_LOSS, VAL_PPL)
BLEU = VAL_BLEU
TEST_BLEU = METRIC_TEST_BLEU  # added to result.json by ``ablate evaluate``
LENGTH = re.compile(r"^val/loss@(\d+)x$")  # a language model's val loss at a multiple of its training length


@dataclass(frozen=True)
class Stat:
    """Mean ± sample standard deviation over n runs; ``std`` is None when n == 1."""

    mean: float
    std: float | None
    n: int

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stat | None:
        """The statistic of the values that are not None; None when there are none."""
        xs = [x for x in values if x is not None]
        if not xs:
            return None
        return cls(statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else None, len(xs))


@dataclass(frozen=True)
class Curve:
    """A metric against step over seeds: mean, min and max at each step some run logged."""

    steps: tuple[int, ...]
    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]

    @classmethod
    def of(cls, runs: Iterable[RunRow]) -> Curve | None:
        """Pool the runs' curves step by step; None when no run logged a point."""
        by_step: dict[int, list[float]] = {}
        for run in runs:
            for step, value in run.curve:
                by_step.setdefault(step, []).append(value)
        if not by_step:
            return None
        steps = sorted(by_step)
        return cls(tuple(steps), tuple(statistics.fmean(by_step[s]) for s in steps),
                   tuple(min(by_step[s]) for s in steps), tuple(max(by_step[s]) for s in steps))


@dataclass(frozen=True)
class VariantRow:
    """One variant (one row of the table): its varied values and its statistics over seeds.

    ``metrics`` maps each metric column (and the headline metric) to its Stat, None when no run
    finished. ``delta`` is the comparison's Δ (row minus base, over the seeds it pairs), None when there is none.
    """

    name: str
    varied: dict[str, Any]
    parameters: int | None
    runs: tuple[RunRow, ...]
    metrics: dict[str, Stat | None]
    delta: float | None
    tokens_per_s: Stat | None
    wall_time_s: Stat | None
    curve: Curve | None
    is_base: bool
    comparison: Comparison | None = None  # against the base on the headline metric (None for the base itself)
    judged: dict[str, Comparison] = field(default_factory=dict)  # the other judged metrics' comparisons, by name
    leaks_labels: bool = False  # its mask scores positions that see their labels: its losses are not comparable
    matched: dict[str, Any] | None = None  # a matched budget: budget, by, value, achieved, target
    stratum: str = ""  # its levels of the factors besides the row ("" without strata): compared within it
    base_name: str | None = None  # the base row's variant in its stratum (what Δ is measured from)
    ahead: tuple[RunRow, ...] = ()  # runs that ended beyond the seeds its verdicts read (sequential): in no column

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    @property
    def n_finished(self) -> int:
        return sum(run.finished for run in self.runs)

    @property
    def n_failed(self) -> int:
        return sum(run.status == Status.FAILED for run in self.runs)

    @property
    def first_error(self) -> str | None:
        """The error message of the first failed run, in plan order."""
        return next((run.error or "(no message)" for run in self.runs if run.status == Status.FAILED), None)

    @property
    def status(self) -> str:
        """``finished`` (every seed), ``partial`` (some), ``failed`` (every seed failed) or ``pending``."""
        if self.n_finished == self.n_runs:
            return Status.FINISHED
        if self.n_finished:
            return "partial"
        return Status.FAILED if self.n_failed == self.n_runs else Status.PENDING


@dataclass(frozen=True)
class Effect:
    """A contrast beyond a row against its stratum's base: a main effect, a simple effect, an interaction."""

    contrast: Contrast
    comparison: Comparison | None  # None until every cell has an ended run


@dataclass(frozen=True)
class Trend:
    """A row across the ladder: its Δ at each step, the slope of Δ against log2(size), and what they say."""

    row: str
    steps: tuple[tuple[str, float | None, VariantRow | None], ...]  # (step, the base's parameters there, the row)
    slope: Comparison | None
    verdict: str


@dataclass(frozen=True)
class Report:
    """A sweep's comparison: its variants in plan order and every run behind them."""

    name: str
    metric: str
    goal: str
    base_variant: str
    varied_keys: tuple[str, ...]
    metric_keys: tuple[str, ...]
    variants: tuple[VariantRow, ...]
    runs: tuple[RunRow, ...]
    sweep_dir: Path
    date: str
    design: Design = Design()  # how the rows were compared with the base (``rows``: the family's size)
    effects: tuple[Effect, ...] = ()  # a two-factor design's main effects, simple effects and interactions
    trends: tuple[Trend, ...] = ()  # a ladder's rows across sizes
    missing: tuple[str, ...] = ()  # strata without a base cell: their rows are not compared
    factor_names: tuple[str, ...] = ()  # the design's factors (row first)
    judged: tuple[Judged, ...] = ()  # the metrics every row is judged on, the headline first

    @property
    def heading(self) -> str:
        """What the report judges, for its title: ``val/loss (minimize)``, ``val/loss (minimize), test/bleu
        (maximize)``."""
        return ", ".join(f"{name} ({goal})" for name, goal in
                         [(self.metric, self.goal), *((j.name, j.goal) for j in self.also_judged)])

    @property
    def also_judged(self) -> tuple[Judged, ...]:
        """The judged metrics besides the headline, each with its own Δ, interval and verdict per row."""
        return tuple(j for j in self.judged if j.name != self.metric)

    @property
    def strata(self) -> list[str]:
        """The strata in order of appearance; [""] when the sweep has none."""
        return list(dict.fromkeys(v.stratum for v in self.variants)) or [""]

    @property
    def has_bleu(self) -> bool:
        return BLEU in self.metric_keys

    @property
    def base(self) -> VariantRow | None:
        return next((v for v in self.variants if v.is_base), None)

    def status_counts(self) -> Counter[str]:
        """How many runs are in each status (finished, failed, running, interrupted, pending)."""
        return Counter(run.status for run in self.runs)


def metric_keys(runs: Iterable[RunRow], headline: str, judged: Iterable[str] = ()) -> tuple[str, ...]:
    """The metric columns: val loss and PPL, val and test BLEU and the val loss at multiples of the training
    length when any run has them, then the headline metric and the other ``judged`` ones."""
    runs = list(runs)
    keys = list(TABLE_METRICS)
    for bleu in (BLEU, TEST_BLEU):
        if any(bleu in run.final or bleu in run.best for run in runs):
            keys.append(bleu)
    lengths = {k for run in runs for k in (*run.final, *run.notes) if LENGTH.match(k)}
    keys += sorted(lengths, key=lambda k: int(LENGTH.match(k).group(1)))
    keys += [k for k in dict.fromkeys([headline, *judged]) if k not in keys]
    return tuple(keys)


def group_by_variant(runs: Iterable[RunRow]) -> dict[str, list[RunRow]]:
    """Runs grouped by variant, variants in order of first appearance."""
    groups: dict[str, list[RunRow]] = {}
    for run in runs:
        groups.setdefault(run.variant, []).append(run)
    return groups


def variant_row(name: str, runs: list[RunRow], keys: tuple[str, ...], *, is_base: bool) -> VariantRow:
    """Aggregate one variant's runs; the delta is filled in later, once the base is known."""
    done = [run for run in runs if run.finished]
    return VariantRow(
        name=name,
        varied=runs[0].varied,
        parameters=next((run.parameters for run in runs if run.parameters is not None), None),
        runs=tuple(runs),
        metrics={key: Stat.of(run.value(key) for run in done) for key in keys},
        delta=None,
        tokens_per_s=Stat.of(run.tokens_per_s for run in done),
        wall_time_s=Stat.of(run.wall_time_s for run in done),
        curve=Curve.of(run for run in runs if run.status != Status.FAILED),
        is_base=is_base,
        leaks_labels=any(run.leaks_labels for run in runs),
        matched=next((run.matched for run in runs if run.matched), None),
    )


def going(row: VariantRow) -> bool:
    """Some run of the row has not ended yet (its numbers are interim)."""
    return any(run.status not in SETTLED for run in row.runs)

