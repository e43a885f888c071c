"""The comparison table of a sweep, one row per variant, like Table 3 of the paper.

Every number of a variant is a mean over the seeds that *finished*, with the sample standard
deviation (n - 1 in the denominator; none for a single run) and the count n. A run's value of a
metric is its final value, falling back to its best. A variant with no finished run has no numbers
at all (it is ``pending``, or ``failed`` when every run failed), never zeros.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ablate.report.collect import Plan, read_plan, read_runs
from ablate.runs.outcome import RunRow, common_step, outcomes
from ablate.runs.status import SETTLED, Status
from ablate.stats.factorial import (LADDER, SIMPLE, TREND, Contrast, Factorial, factors_of, judge, trend_verdict)
from ablate.stats import verdict as V
from ablate.stats.compare import Comparison
from ablate.stats.design import Design, Judged

TABLE_METRICS = ("val/loss", "val/ppl")
BLEU = "val/bleu"
TEST_BLEU = "test/bleu"  # added to result.json by ``ablate evaluate``
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


LEAKS = "not comparable: its mask leaks labels"


def factorial(plan: Plan, rows: list[VariantRow]) -> Factorial:
    """The plan's cells and contrasts (:mod:`ablate.stats.factorial`); a plan without factors compares every variant
    with the base, as plans did before they recorded factors."""
    return Factorial(factors_of(plan.factors), {row.name: row.runs[0].factors for row in rows}, plan.base_variant,
                     frozenset(r.name for r in rows if r.leaks_labels), {row.name: row.parameters for row in rows})


def with_comparisons(rows: list[VariantRow], judged: tuple[Judged, ...], design: Design, design_of: Factorial):
    """Every contrast of the family (:class:`Factorial`) judged on each judged metric at its share of the family's
    error (rows x metrics): each row against the base row of its stratum, and, on the headline metric (the first),
    a two-factor design's effects or a ladder's trends. A row whose mask leaks labels is shown its Δ, untested,
    outside the family. Returns the rows (comparisons and the headline's Δ set), the design (its family's size), the
    effects and the trends."""
    family = design_of.family()
    design = replace(design, rows=max(1, len(family)), metrics=len(judged))
    by_name = {row.name: row for row in rows}
    found = {j.name: _judged(design_of, by_name, design.judging(j), j, every=j is judged[0]) for j in judged}
    headline = judged[0].name
    simple = {c.row: c for c in design_of.contrasts if c.kind == SIMPLE}
    out = []
    for row in rows:
        mine = {name: c for name, cs in found.items() if row.name in simple and (c := cs.get(simple[row.name]))}
        if row.leaks_labels:
            mine = {name: replace(c, verdict=LEAKS, interval=None, p=None, level=None, decided_at=None, better=None,
                                  detectable=None, seeds_for_margin=None) for name, c in mine.items()}
        c = mine.pop(headline, None)
        delta = 0.0 if row.is_base and row.metrics[headline] is not None else (c.diff if c else None)
        out.append(replace(row, comparison=c, judged=mine, delta=delta))
    effects = tuple(Effect(c, found[headline].get(c)) for c in design_of.contrasts if c.kind not in (SIMPLE, TREND))
    rows_by = {r.name: r for r in out}
    trends = []
    for c in (c for c in design_of.contrasts if c.kind == TREND):
        steps = tuple((level, design_of.sizes.get(level), rows_by.get(design_of.cell({"row": c.row, LADDER: level})))
                      for level in next(f for f in design_of.factors if f.name == LADDER).levels)
        verdicts = [r.comparison.verdict if r is not None and r.comparison else None for _, _, r in steps]
        deltas = [r.delta for _, _, r in steps if r is not None and r.delta is not None]
        mean = sum(deltas) / len(deltas) if deltas else None
        trends.append(Trend(c.row, steps, found[headline].get(c), trend_verdict(found[headline].get(c), verdicts,
                                                                                 mean)))
    return out, design, effects, tuple(trends)


def _judged(design_of: Factorial, rows: dict[str, VariantRow], design: Design, metric: Judged, *,
            every: bool) -> dict[Contrast, Comparison]:
    """The contrasts judged on one metric: all of them (``every``: the headline), else the rows against their
    base; a contrast that repeats an earlier one (same weights) shares its judgement."""
    ended = {name: outcomes(row.runs, metric.name) for name, row in rows.items()}
    found: dict[Contrast, Comparison] = {}
    for c in design_of.contrasts:
        if not every and c.kind != SIMPLE:
            continue
        if design_of.same[c] in found:
            found[c] = found[design_of.same[c]]
        elif (judged := judge_runs(c, rows, ended, design, metric.goal, metric.name)) is not None:
            found[c] = judged
    return found


def judge_runs(contrast: Contrast, rows: dict[str, VariantRow], ended: dict[str, dict[int, float]], design: Design,
               goal: str, metric: str) -> Comparison | None:
    """A contrast's comparison from its cells' runs; None while a cell has no outcome.

    Runs stopped early (hyperband) are outcomes of a known kind: a stopped run has no final value, and the runs that
    went on are the ones that looked better, so comparing those alone would favour the side whose runs were stopped
    more often (a row noisier than the base was called *better* in 11% of null tables at 10 seeds:
    benchmarks/verdicts.json). Once any run of the contrast's cells was stopped, every cell is compared at the last
    step that all their finished and stopped runs logged, where no run has been selected away; with no such step, no
    verdict, and the reason.
    """
    runs = [run for v in contrast.cells for run in rows[v].runs]
    interim = any(going(rows[v]) for v in contrast.cells)
    stopped = sum(run.status == Status.STOPPED for run in runs)
    if not stopped:
        return judge(contrast, ended, design, goal, interim=interim) if all(ended.get(v) for v in contrast.cells) \
            else None
    counted = f"{stopped} of its {len(runs)} runs were stopped early (hyperband)"
    step = common_step(runs)
    if step is None:
        untested = judge(contrast, {v: {} for v in contrast.cells}, design, goal, interim=interim)
        return replace(untested, verdict=V.name(V.CANNOT_TEST),
                       reason=f"{counted} and its runs share no logged step to compare them at")
    c = judge(contrast, {v: outcomes(rows[v].runs, metric, step) for v in contrast.cells}, design, goal,
              interim=interim)
    why = (f"compared at step {step}, the last step every run reached: {counted}, and the runs that went on are not "
           "a fair sample of their variant")
    return replace(c, step=step, reason="; ".join(filter(None, [why, c.reason])))


def build_report(sweep_dir: Path, *, now: datetime | None = None) -> Report:
    """Collect a sweep directory into a comparison table, one row per variant in plan order.

    Args:
        sweep_dir: the sweep directory (``plan.json`` and ``runs/<id>/``); runs may still be going.
        now: the report's date; the current time when None.

    Returns:
        The report. Curves pool every run that has not failed (a running run shows its progress);
        the table's numbers use finished runs only.

    Raises:
        FileNotFoundError: ``sweep_dir`` has no plan.json.
        ConfigError: plan.json lacks a required key or its metric is malformed.
    """
    sweep_dir = Path(sweep_dir)
    plan = read_plan(sweep_dir)
    runs = read_runs(sweep_dir, plan)
    keys = metric_keys(runs, plan.metric, [j.name for j in plan.judged])
    rows = [variant_row(name, group, keys, is_base=name == plan.base_variant)
            for name, group in group_by_variant(runs).items()]
    cells = factorial(plan, rows)
    rows = [replace(row, is_base=cells.is_base(row.name), stratum=cells.stratum(row.name),
                    base_name=cells.stratum_base(row.name)) for row in rows]
    judged = plan.judged or (Judged(plan.metric, plan.goal, plan.design.margin),)
    rows, design, effects, trends = with_comparisons(rows, judged, plan.design, cells)
    return Report(
        name=plan.name,
        metric=plan.metric,
        goal=plan.goal,
        base_variant=plan.base_variant,
        varied_keys=plan.varied_keys,
        metric_keys=keys,
        variants=tuple(rows),
        runs=tuple(runs),
        sweep_dir=sweep_dir,
        date=(now or datetime.now()).strftime("%Y-%m-%d %H:%M"),
        design=design,
        effects=effects,
        trends=trends,
        missing=tuple(cells.missing),
        factor_names=tuple(f.name for f in cells.factors),
        judged=judged,
    )
