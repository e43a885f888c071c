"""The variant table's columns, one entry each, that every format reads.

A :class:`Column` holds everything about one column: its names in table.csv and the W&B table with its raw values
(full precision, None where unknown), and, when it is displayed, its title, how its cell prints (the terminal,
Markdown, HTML), its alignment, its place in the verdict view and in a narrow terminal's drop order, and whether the
design shows it. :func:`columns` lists them in the CSV's order (the CSV holds every column); ``shown`` orders the
displayed table. Adding a statistic is one entry here plus its computation (:mod:`ablate.stats.compare`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ablate.formats import format_duration
from ablate.report import bounds
from ablate.report.badges import BASE  # the base row's verdict and Δ
from ablate.report.cells import (FORMATS, MAX_ERROR, NUMBER, format_count, format_value,
                                 interval_header, label, metric_cell, one_line, pairs_text, seeds_range, short_labels,
                                 verdict_text)
from ablate.report.table import Report, Stat, VariantRow
from ablate.stats.compare import Comparison
from ablate.stats.design import Judged
from ablate.stats.verdict import DECIDED, leaking, said


@dataclass(frozen=True)
class Column:
    """One column of the variant table.

    Attributes:
        csv: its names in table.csv and the W&B table (a statistic with a spread takes three: mean, std, n).
        raw: a row's values, one per name of ``csv``.
        title: its title in the displayed table; None for a column of the CSV alone.
        cell: a row's displayed cell.
        shown: where the displayed table puts it: columns go in increasing ``shown``, ties in the CSV's order.
        left: aligned left (text); else right (numbers).
        verdict: its place in the verdict view (the variant, its headline metric, its runs, Δ, its interval, its
            verdict); None for the columns only ``--wide`` and the folded table show.
        drop: its place in the order a narrow terminal gives up the verdict view's columns; None: it always stays.
        applies: whether this report's design displays it (the CSV always has it, so its columns are the same for
            every design).
        timed: its values depend on how the sweep's workers were timed (throughput, wall time, the runs started
            ahead of a look), not on its design and outcomes: two launches of one sweep agree on every other column.
    """

    csv: tuple[str, ...]
    raw: Callable[[VariantRow], Sequence[Any]]
    title: str | None = None
    cell: Callable[[VariantRow], str] | None = None
    shown: float = 0.0
    left: bool = False
    verdict: int | None = None
    drop: int | None = None
    applies: bool = True
    timed: bool = False


def stat_fields(stat: Stat | None) -> list[Any]:
    """A statistic's raw mean, std and n; None, None, 0 when nothing was measured."""
    return [stat.mean, stat.std, stat.n] if stat else [None, None, 0]


def spread(name: str) -> tuple[str, ...]:
    """The CSV names of a statistic with a spread: ``<name>_mean``, ``_std``, ``_n``."""
    return tuple(f"{name}_{part}" for part in ("mean", "std", "n"))


def columns(report: Report, *, error_limit: int | None = MAX_ERROR) -> list[Column]:
    """Every column of ``report``'s variant table, in the CSV's order.

    Args:
        report: from :func:`ablate.report.build_report`.
        error_limit: characters of the first error in the displayed failures' cell; None for all of it.
    """
    return [*_identity(report), *_counts(report, error_limit), *_metrics(report), *_comparison(report),
            *_costs(report)]


def _identity(report: Report) -> list[Column]:
    """The variant, its stratum, whether it is the base, its status, then its value of each varied key."""
    words = {key for key in report.varied_keys if any(isinstance(r.varied.get(key), str) for r in report.variants)}
    varied = [Column((key,), lambda row, key=key: [row.varied.get(key)], title, shown=1.0, left=key in words,
                     cell=lambda row, key=key: format_value(row.varied.get(key)))
              for key, title in zip(report.varied_keys, short_labels(report.varied_keys))]
    return [Column(("variant",), lambda row: [row.name], "variant", lambda row: row.name, shown=0.0, left=True,
                   verdict=0),
            Column(("stratum",), lambda row: [row.stratum]), Column(("is_base",), lambda row: [row.is_base]),
            Column(("status",), lambda row: [row.status]), *varied]


def _failed_cell(row: VariantRow, error_limit: int | None) -> str:
    ended = row.n_finished + row.n_failed
    return f"{row.n_failed}/{ended}: {one_line(row.first_error, error_limit)}" if row.n_failed else ""


def _counts(report: Report, error_limit: int | None) -> list[Column]:
    """The parameters, the runs (finished of planned) and the failed runs (of the ended, with the first error)."""
    return [Column(("parameters",), lambda row: [row.parameters], "params", lambda row: format_count(row.parameters),
                   shown=2.0),
            Column(("runs", "finished"), lambda row: [row.n_runs, row.n_finished], "runs",
                   lambda row: f"{row.n_finished}/{row.n_runs}", shown=15.0, verdict=2, drop=0),
            Column(("failed",), lambda row: [row.n_failed], "failed", lambda row: _failed_cell(row, error_limit),
                   shown=16.0, left=True)]


def _delta_cell(row: VariantRow, spec: str) -> str:
    """Δ signed, on its side of 0 and of ±the margin as its interval's bounds are (never ``+0.000`` beside *worse*)."""
    if row.delta is None:
        return "—"
    return BASE if row.is_base else bounds.signed(row.delta, spec, row.comparison.margin if row.comparison else None)


def _metrics(report: Report) -> list[Column]:
    """Each metric's mean ± sd (the headline metric's in the verdict view), then the headline metric's Δ."""
    spec = FORMATS.get(report.metric, NUMBER)
    headline = label(report.metric)
    means = [Column(spread(key), lambda row, key=key: stat_fields(row.metrics[key]), label(key),
                    lambda row, key=key: metric_cell(row, key), shown=3.0,
                    verdict=1 if key == report.metric else None, drop=1 if key == report.metric else None)
             for key in report.metric_keys]
    return [*means, Column((f"{report.metric}_delta",), lambda row: [row.delta], f"Δ {headline}",
                           lambda row: _delta_cell(row, spec), shown=4.0, verdict=3, drop=2)]


def _p_cell(c: Comparison) -> str:
    return "—" if c.p is None else (f"{c.p:.3f}" if c.p >= 0.001 else "<0.001")


def _comparison(report: Report) -> list[Column]:
    """The row's comparison with its base on the headline metric: its interval, adjusted p, pairs, seeds better,
    verdict, the look that decided it (sequential designs), its detectable Δ, the seeds its margin needs (with a
    margin), how its failures weighed, its skew, whether it leaks labels, and what a matched budget held; then each
    other judged metric's Δ, interval, p, verdict, failure counts and their test (:func:`_judged`)."""
    spec, design = FORMATS.get(report.metric, NUMBER), report.design
    raw_of, cell_of = _readers(report.metric, report.metric)
    interval, level, p, verdict, decided = _judged(report, report.metric)
    return [
        interval, level, p,
        Column(("paired", "pairs"), raw_of(lambda c: [c.paired, c.n], 2), "pairs", cell_of(pairs_text, ""),
               shown=9.0),
        Column(("seeds_better",), raw_of(lambda c: [c.better], 1), "seeds better",
               cell_of(lambda c: c.better or "—"), shown=7.0),
        verdict, decided,
        Column(("detectable_delta",), raw_of(lambda c: [c.detectable], 1), "detectable Δ",
               cell_of(lambda c: "" if c.detectable is None else f"{c.detectable:{spec}}", ""), shown=10.0),
        Column(("margin",), raw_of(lambda c: [c.margin], 1)),
        Column(("seeds_for_margin_low", "seeds_for_margin_high"),
               raw_of(lambda c: c.seeds_for_margin or (None, None), 2), f"seeds for ±{design.margin}",
               cell_of(lambda c: "" if said(c.verdict, *DECIDED) else seeds_range(c.seeds_for_margin), ""),
               shown=12.0, applies=design.margin is not None),  # a plan for the rows still open
        *_failures(report, report.metric),  # the runs the comparison's look counts (the failed column: every run)
        Column(("compared_at_step",), raw_of(lambda c: [c.step], 1)),
        Column(("skew", "skewed", "sign_flip_p"), raw_of(lambda c: [c.skew, c.skewed, c.sign_flip_p], 3)),
        Column(("leaks_labels",), lambda row: [row.leaks_labels]),
        Column(("matched_by", "matched_value"), lambda row: [(row.matched or {}).get(k) for k in ("by", "value")]),
        *(column for i, j in enumerate(report.also_judged, start=1) for column in _also(report, j, i)),
    ]


def _comparison_on(metric: str, headline: str) -> Callable[[VariantRow], Comparison | None]:
    """A row's comparison on ``metric``: its ``comparison`` on the headline, else one of its ``judged``."""
    return (lambda row: row.comparison) if metric == headline else (lambda row: row.judged.get(metric))


Reader = Callable[[Callable[[Comparison], Any], Any], Callable[[VariantRow], Any]]


def _readers(metric: str, headline: str) -> tuple[Reader, Reader]:
    """``raw_of(raw, n)`` and ``cell_of(cell, missing)`` for the comparison on ``metric``: a comparison's raw values
    (``n`` Nones for a row without one: the base, a row not yet compared), and its displayed cell (blank for the
    base, ``missing`` for a row not yet compared)."""
    of = _comparison_on(metric, headline)

    def raw_of(raw: Callable[[Comparison], Sequence[Any]], n: int) -> Callable[[VariantRow], Sequence[Any]]:
        return lambda row: [None] * n if of(row) is None else raw(of(row))

    def cell_of(cell: Callable[[Comparison], str], missing: str = "—") -> Callable[[VariantRow], str]:
        return lambda row: "" if row.is_base else (missing if of(row) is None else cell(of(row)))

    return raw_of, cell_of


def _judged(report: Report, metric: str, prefix: str = "", at: float = 0.0, view: int = 4) -> list[Column]:
    """One judged metric's interval, adjusted p, verdict and deciding look: the headline's under their own names
    (``prefix`` ""), another's prefixed with its name (``test/bleu_ci_low``, and its margin). ``at`` offsets where
    they are shown, ``view`` is the interval's place in the verdict view (the verdict's is next)."""
    raw_of, cell_of = _readers(metric, report.metric)
    spec = FORMATS.get(metric, NUMBER)
    of = _comparison_on(metric, report.metric)

    def verdict_raw(row: VariantRow) -> list[Any]:
        c = of(row)
        if c is None:
            return [BASE if row.is_base else None]
        return [leaking(c.statement, row.leaks_labels)]

    def verdict_cell(row: VariantRow) -> str:
        c = of(row)
        if row.is_base:
            return BASE
        if c is None:
            return leaking("—", row.leaks_labels)
        return verdict_text(report, row, c=c)

    name = f"{label(metric)} " if prefix else ""  # another metric's titles say which: "test BLEU verdict"
    return [
        Column((f"{prefix}ci_low", f"{prefix}ci_high"), raw_of(lambda c: c.interval or (None, None), 2),
               f"{name}{1 - report.design.alpha:.0%} CI" if prefix else interval_header(report),
               cell_of(lambda c: bounds.interval(*c.interval, spec, c.margin) if c.interval else "—"),
               shown=5.0 + at, verdict=view, drop=3 + at),
        Column((f"{prefix}ci_level",), raw_of(lambda c: [c.level], 1)),
        Column((f"{prefix}p_adj",), raw_of(lambda c: [c.p], 1), name + "p (adj.)", cell_of(_p_cell),
               shown=6.0 + at),
        Column((f"{prefix}verdict",), verdict_raw, name + "verdict", verdict_cell, shown=8.0 + at, left=True,
               verdict=view + 1),
        Column((f"{prefix}decided_at",), raw_of(lambda c: [c.decided_at], 1), name + "decided at",
               cell_of(lambda c: "" if c.decided_at is None else f"{c.decided_at} seeds", ""), shown=11.0 + at,
               applies=report.design.sequential),
    ] + ([Column((f"{prefix}margin",), raw_of(lambda c: [c.margin], 1)), *_failures(report, metric, prefix)]
         if prefix else [])


FAILURES = ("row_failed", "row_runs", "base_failed", "base_runs")  # Comparison.failed, in its order


def _failures(report: Report, metric: str, prefix: str = "") -> list[Column]:
    """The failed runs and runs the comparison on ``metric`` counts at its look, and Fisher's exact p on them: each
    judged metric its own (a run that finished without logging a metric is no outcome of it)."""
    raw_of, _ = _readers(metric, report.metric)
    return [Column(tuple(prefix + name for name in FAILURES), raw_of(lambda c: c.failed, 4)),
            Column((f"{prefix}failure_p",), raw_of(lambda c: [c.failure_p], 1))]


def _also(report: Report, j: Judged, i: int) -> list[Column]:
    """A judged metric besides the headline: its Δ, then :func:`_judged`'s columns, shown after the headline's
    (the verdict view: its Δ, interval and verdict after the headline's verdict; a narrow terminal gives up its Δ
    and interval after the headline's)."""
    raw_of, cell_of = _readers(j.name, report.metric)
    spec = FORMATS.get(j.name, NUMBER)
    view = 3 + 3 * i  # the headline's take 0-5
    delta = Column((f"{j.name}_delta",), raw_of(lambda c: [c.diff], 1), f"Δ {label(j.name)}",
                   cell_of(lambda c: "—" if c.diff is None else bounds.signed(c.diff, spec, c.margin)),
                   shown=4.5 + 0.01 * i, verdict=view, drop=2.5 + 0.01 * i)
    return [delta, *_judged(report, j.name, prefix=f"{j.name}_", at=0.5 + 0.01 * i, view=view + 1)]


def _costs(report: Report) -> list[Column]:
    """Throughput and wall time (means with their spread), the runs that ended beyond the seeds the row's verdicts
    read (a sequential design's seeds started ahead of a look: in no other column), then the first error in full."""
    def mean(stat: Stat | None) -> float | None:
        return stat.mean if stat else None

    return [Column(spread("tokens_per_s"), lambda row: stat_fields(row.tokens_per_s), "tokens/s",
                   lambda row: format_count(mean(row.tokens_per_s)), shown=13.0, timed=True),
            Column(spread("wall_time_s"), lambda row: stat_fields(row.wall_time_s), "wall time",
                   lambda row: format_duration(mean(row.wall_time_s)), shown=14.0, timed=True),
            Column(("ahead_not_read",), lambda row: [len(row.ahead)], "ahead, not read",
                   lambda row: str(len(row.ahead)) if row.ahead else "", shown=15.5,
                   applies=report.design.sequential, timed=True),
            Column(("first_error",), lambda row: [row.first_error])]


def timed_names(report: Report) -> list[str]:
    """The CSV names of the columns whose values depend on how the workers were timed (``timed``): the only ones in
    which two launches of one sweep, with any workers, killed and relaunched or not, may differ."""
    return [name for column in columns(report) if column.timed for name in column.csv]


def verdict_titles(report: Report) -> set[str]:
    """The titles of the columns that hold verdicts (the headline's, and each other judged metric's): each cell a
    verdict every displayed format marks in its kind's colour."""
    return {"verdict", *(f"{label(j.name)} verdict" for j in report.also_judged)}


def displayed(report: Report, *, verdict_view: bool = False, error_limit: int | None = MAX_ERROR) -> list[Column]:
    """The columns the displayed table shows, in its order: every one that applies, or the verdict view's."""
    cols = [c for c in columns(report, error_limit=error_limit) if c.title is not None and c.applies]
    if verdict_view:
        return sorted((c for c in cols if c.verdict is not None), key=lambda c: c.verdict)
    return sorted(cols, key=lambda c: c.shown)
