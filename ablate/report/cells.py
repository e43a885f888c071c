"""A variant's cells as every displayed format prints them (the terminal, Markdown, HTML): numbers rounded for reading,
a metric's mean ± sd, a verdict with its reasons. :mod:`ablate.report.columns` puts them in columns."""

from __future__ import annotations

from typing import Any

from ablate.report import bounds
from ablate.report.table import BLEU, LENGTH, TEST_BLEU, Report, Stat, VariantRow
from ablate.stats.compare import Comparison
from ablate.stats.planning import MAX_PLANNED
from ablate.stats.verdict import UNDECIDED, WORSE, leaking, said
from ablate.runs.metrics import VAL_ACC, VAL_LOSS, VAL_PPL

LABELS = {VAL_LOSS: "val loss", VAL_PPL: "val PPL", BLEU: "val BLEU", TEST_BLEU: "test BLEU", VAL_ACC: "val acc"}
FORMATS = {VAL_LOSS: ".3f", VAL_PPL: ".2f", BLEU: ".2f", TEST_BLEU: ".2f", VAL_ACC: ".3f"}
NUMBER = ".4g"
MAX_ERROR = 60  # characters of an error message in the Markdown and terminal tables


def short_labels(keys: tuple[str, ...]) -> list[str]:
    """``model.n_heads`` -> ``n_heads``, unless two keys would share a last segment."""
    tails = [key.rsplit(".", 1)[-1] for key in keys]
    return [tail if tails.count(tail) == 1 else key for key, tail in zip(keys, tails)]


def format_value(value: Any) -> str:
    """A varied value as written in a config: ``8``, ``0.1``, ``pre``, ``true``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):  # a component's arguments: window=16, prefix_len=32
        return ", ".join(f"{k}={format_value(v)}" for k, v in value.items()) or "—"
    return str(value)


def format_count(n: float | None) -> str:
    """65130496 -> ``65.13M``; 12345 -> ``12.3k``."""
    if n is None:
        return "—"
    if abs(n) >= 1e6:
        return f"{n / 1e6:.2f}M"
    return f"{n / 1e3:.1f}k" if abs(n) >= 1e3 else f"{n:.0f}"


def format_stat(stat: Stat, spec: str) -> str:
    """``2.750 ± 0.354``; the mean alone for a single run."""
    return f"{stat.mean:{spec}}" if stat.std is None else f"{stat.mean:{spec}} ± {stat.std:{spec}}"


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def interval_header(report: Report) -> str:
    return f"{1 - report.design.alpha:.0%} CI (simult.)"


def label(key: str) -> str:
    """A metric's column title: ``val loss``, ``test BLEU``, ``val loss 2x`` (twice the training length)."""
    match = LENGTH.match(key)
    return f"val loss {match.group(1)}x" if match else LABELS.get(key, key)


def metric_cell(row: VariantRow, key: str) -> str:
    """``mean ± std``; the variant's status (``pending``, ``failed``) when no run finished, never a zero;
    ``cannot`` where its runs could not be scored (a model that encodes fewer positions than the length)."""
    stat = row.metrics[key]
    if stat is not None:
        return format_stat(stat, FORMATS.get(key, ".3f" if LENGTH.match(key) else NUMBER))
    if any(key in run.notes for run in row.runs):
        return "cannot"
    return row.status if row.n_finished == 0 else "—"  # "—": finished runs that did not log this metric


def verdict_text(report: Report, row: VariantRow, spec: str = ".3g", c: Comparison | None = None) -> str:
    """The verdict as the table says it: why a row is untested or undecided, and whether it is interim. ``c``: the
    comparison on a judged metric besides the headline (default: the headline's)."""
    c = row.comparison if c is None else c
    if row.leaks_labels:
        return leaking(c.verdict, row.leaks_labels)
    text = c.verdict
    if c.on_failures:
        text += " (fails more often)" if said(c.verdict, WORSE) else " (fails less often)"
    elif c.interval and c.failed[0] * c.failed[3] != c.failed[2] * c.failed[1]:  # read off one side of the interval
        text += " (fails more often)" if c.failed[0] * c.failed[3] > c.failed[2] * c.failed[1] else \
            " (the base fails more often)"
    elif said(c.verdict, UNDECIDED) and c.resolved is not None:
        text += f" (|Δ| < {bounds.at_least(c.resolved, spec, bounds.lines(c.margin))})"
    elif c.detail:  # inside the margin, yet not 0
        text = c.statement
    if c.step is not None:
        text += f" (at step {c.step})"
    return text + (" (interim)" if c.interim else "")


def pairs_text(c: Comparison) -> str:
    """``3 paired``, ``4 of 5 paired`` (seeds both sides ended, of the row's), ``3 vs 4 unpaired``."""
    if not c.paired:
        return f"{c.n} vs {c.m} unpaired"
    return f"{c.n} paired" if c.n == c.ended else f"{c.n} of {c.ended} paired"


def seeds_range(seeds: tuple[int | None, int | None] | None) -> str:
    """``6–13`` (observed sd to its upper bound), ``6``, ``>1000``."""
    if seeds is None:
        return ""
    lo, hi = (f">{MAX_PLANNED}" if n is None else str(n) for n in seeds)
    return lo if lo == hi else f"{lo}–{hi}"
