"""A sweep folder's report built: its runs grouped into the variant table (:mod:`ablate.report.table`), and every
row judged against its base on each judged metric, with a factorial design's effects and a ladder's trends.

In a sequential design every column of a row reads the seeds its verdicts read (:func:`read_seeds`): a run that ended
beyond them (a seed started ahead of a look in an idle worker, :mod:`ablate.sweep.sequential`) is set apart, in the
row's ``ahead``, so that the table depends on the design and the outcomes, never on how the workers were timed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ablate.report.collect import Plan, read_runs, report_plan
from ablate.report.table import (Effect, Report, Trend, VariantRow, going, group_by_variant, metric_keys,
                                 variant_row)
from ablate.runs.outcome import common_step, outcomes
from ablate.runs.status import SETTLED, Status
from ablate.stats import verdict as V
from ablate.stats.compare import Comparison
from ablate.stats.design import Design, Judged
from ablate.stats.factorial import LADDER, SIMPLE, TREND, Contrast, Factorial, factors_of, judge


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
            mine = {name: replace(c, verdict=V.leaking(c.verdict, row.leaks_labels), interval=None, p=None, level=None,
                                  decided_at=None, better=None, detectable=None, seeds_for_margin=None)
                    for name, c in mine.items()}
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
        slope = found[headline].get(c)
        trends.append(Trend(c.row, steps, slope, V.trend(slope and slope.interval, slope and slope.diff, verdicts,
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
        return replace(untested, verdict=V.no_common_step(),
                       reason=f"{counted} and its runs share no logged step to compare them at")
    c = judge(contrast, {v: outcomes(rows[v].runs, metric, step) for v in contrast.cells}, design, goal,
              interim=interim)
    why = (f"compared at step {step}, the last step every run reached: {counted}, and the runs that went on are not "
           "a fair sample of their variant")
    return replace(c, step=step, reason="; ".join(filter(None, [why, c.reason])))


def read_seeds(design_of: Factorial, rows: list[VariantRow], judged: tuple[Judged, ...],
               design: Design) -> dict[str, set[int]]:
    """The seeds of each cell that a sequential design's verdicts read: for every contrast that asks for seeds (the
    family, judged on each judged metric as the sweep's queue judges it), the first n seeds of each of its cells, n
    its reported look (the look that decided it, else its last complete one). A cell that no contrast has judged at a
    complete first look yet is absent: nothing has been read of it, nor run ahead of it."""
    family = design_of.family()
    design = replace(design, rows=max(1, len(family)), metrics=len(judged))
    by_name = {row.name: row for row in rows}
    first = max(2, len(design.first))
    read: dict[str, set[int]] = {}
    for metric in judged:
        ended = {name: outcomes(row.runs, metric.name) for name, row in by_name.items()}
        for c in (c for c in family if c.drives):
            found = judge_runs(c, by_name, ended, design.judging(metric), metric.goal, metric.name)
            if found is not None and found.look >= first:
                for v in c.cells:
                    read.setdefault(v, set()).update(design.seeds(found.look))
    return read


def reading(row: VariantRow, seeds: set[int] | None, keys: tuple[str, ...]) -> VariantRow:
    """The row over the runs its verdicts read (``seeds``; None: every run), with those that ended beyond them in
    ``ahead``; a run still going stays (its look is under way)."""
    ahead = tuple(run for run in row.runs if seeds is not None and run.seed not in seeds and run.status in SETTLED)
    if not ahead:
        return row
    kept = [run for run in row.runs if run not in ahead]
    return replace(variant_row(row.name, kept, keys, is_base=row.is_base), stratum=row.stratum,
                   base_name=row.base_name, ahead=ahead)


def build_report(sweep_dir: Path, *, now: datetime | None = None) -> Report:
    """Collect a sweep directory into a comparison table, one row per variant in plan order.

    Args:
        sweep_dir: the sweep directory (``plan.json`` and ``runs/<id>/``); runs may still be going.
        now: the report's date; the current time when None.

    Returns:
        The report. Curves pool every run that has not failed (a running run shows its progress);
        the table's numbers use finished runs only, and, in a sequential design, only the seeds the verdicts read
        (:func:`read_seeds`; the runs that ended beyond them are each row's ``ahead``).

    Raises:
        FileNotFoundError: ``sweep_dir`` has no plan.json.
        ConfigError: plan.json lacks a required key or its metric is malformed.
    """
    sweep_dir = Path(sweep_dir)
    plan = report_plan(sweep_dir)
    runs = read_runs(sweep_dir, plan)
    keys = metric_keys(runs, plan.metric, [j.name for j in plan.judged])
    rows = [variant_row(name, group, keys, is_base=name == plan.base_variant)
            for name, group in group_by_variant(runs).items()]
    cells = factorial(plan, rows)
    rows = [replace(row, is_base=cells.is_base(row.name), stratum=cells.stratum(row.name),
                    base_name=cells.stratum_base(row.name)) for row in rows]
    judged = plan.judged or (Judged(plan.metric, plan.goal, plan.design.margin),)
    if plan.design.sequential:
        read = read_seeds(cells, rows, judged, plan.design)
        rows = [reading(row, read.get(row.name), keys) for row in rows]
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
