"""The report as text for reading: display cells shared by every format, Markdown, aligned plain text.

Display cells round numbers for reading; :mod:`ablate.report.records` keeps full precision for the CSV
files and the W&B table.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ablate.report import bounds
from ablate.report.table import BLEU, LEAKS, LENGTH, TEST_BLEU, Report, Stat, VariantRow
from ablate.runs.status import Status
from ablate.stats.compare import Comparison
from ablate.stats.planning import MAX_PLANNED, POWER, SD_CONFIDENCE
from ablate.stats.verdict import DECIDED, UNDECIDED, WORSE, said

LABELS = {"val/loss": "val loss", "val/ppl": "val PPL", BLEU: "val BLEU", TEST_BLEU: "test BLEU", "val/acc": "val acc"}
FORMATS = {"val/loss": ".3f", "val/ppl": ".2f", BLEU: ".2f", TEST_BLEU: ".2f", "val/acc": ".3f"}
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


def format_duration(seconds: float | None) -> str:
    """42.0 -> ``42s``; 125 -> ``2m 05s``; 3720 -> ``1h 02m``."""
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    return f"{s // 60}m {s % 60:02d}s" if s < 3600 else f"{s // 3600}h {s % 3600 // 60:02d}m"


def format_stat(stat: Stat, spec: str) -> str:
    """``2.750 ± 0.354``; the mean alone for a single run."""
    return f"{stat.mean:{spec}}" if stat.std is None else f"{stat.mean:{spec}} ± {stat.std:{spec}}"


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def interval_header(report: Report) -> str:
    return f"{1 - report.design.alpha:.0%} CI (simult.)"


def display_headers(report: Report) -> list[str]:
    """Column titles of the displayed table."""
    metrics = [label(key) for key in report.metric_keys]
    design = report.design
    extra = (["decided at"] if design.sequential else []) + ([f"seeds for ±{design.margin}"] if design.margin else [])
    return ["variant", *short_labels(report.varied_keys), "params", *metrics,
            f"Δ {label(report.metric)}", interval_header(report), "p (adj.)", "seeds better", "verdict", "pairs",
            "detectable Δ", *extra, "tokens/s", "wall time", "runs", "failed"]


def text_columns(report: Report) -> set[int]:
    """Displayed columns aligned left: the variant, varied keys with a text value, the verdict, the failures."""
    words = {1 + i for i, key in enumerate(report.varied_keys)
             if any(isinstance(row.varied.get(key), str) for row in report.variants)}
    headers = display_headers(report)
    return {0, *words, headers.index("verdict"), len(headers) - 1}


def verdict_columns(report: Report) -> list[int]:
    """The columns of the verdict view, as indices into :func:`display_headers`: the variant, its headline metric,
    its runs, then Δ, its interval and the verdict side by side (the verdict last, so a long one widens nothing)."""
    headers = display_headers(report)
    names = [label(report.metric), "runs", f"Δ {label(report.metric)}", interval_header(report), "verdict"]
    return [0, *(headers.index(name, 1) for name in names)]


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


def display_cells(report: Report, row: VariantRow, *, error_limit: int | None = MAX_ERROR) -> list[str]:
    """One variant's displayed cells, aligned with :func:`display_headers`."""
    metrics = [metric_cell(row, key) for key in report.metric_keys]
    spec = FORMATS.get(report.metric, NUMBER)
    delta = "—" if row.delta is None else ("base" if row.is_base else f"{row.delta:+{spec}}")
    ended = row.n_finished + row.n_failed
    failed = f"{row.n_failed}/{ended}: {one_line(row.first_error, error_limit)}" if row.n_failed else ""
    return [row.name, *(format_value(row.varied.get(k)) for k in report.varied_keys), format_count(row.parameters),
            *metrics, delta, *comparison_cells(report, row, spec),
            format_count(row.tokens_per_s.mean if row.tokens_per_s else None),
            format_duration(row.wall_time_s.mean if row.wall_time_s else None),
            f"{row.n_finished}/{row.n_runs}", failed]


def verdict_text(report: Report, row: VariantRow, spec: str = ".3g") -> str:
    """The verdict as the table says it: why a row is untested or undecided, and whether it is interim."""
    c = row.comparison
    if row.leaks_labels:
        return LEAKS
    text = c.verdict
    if c.on_failures:
        text += " (fails more often)" if said(c.verdict, WORSE) else " (fails less often)"
    elif c.interval and c.failed[0] * c.failed[3] != c.failed[2] * c.failed[1]:  # read off one side of the interval
        text += " (fails more often)" if c.failed[0] * c.failed[3] > c.failed[2] * c.failed[1] else \
            " (the base fails more often)"
    elif said(c.verdict, UNDECIDED) and c.resolved is not None:
        text += f" (|Δ| < {bounds.bound(c.resolved, spec, bounds.lines(c.margin))})"
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


def comparison_cells(report: Report, row: VariantRow, spec: str) -> list[str]:
    """The interval, the adjusted p, the seeds better, the verdict, the pairs, the detectable Δ, when it was decided
    (sequential designs) and the seeds a margin needs (with a margin)."""
    extra = [report.design.sequential, report.design.margin is not None].count(True)
    if row.is_base:
        return ["", "", "", "base", "", "", *[""] * extra]
    c = row.comparison
    if c is None:
        return ["—", "—", "—", LEAKS if row.leaks_labels else "—", "", "", *[""] * extra]
    interval = bounds.interval(*c.interval, spec, c.margin) if c.interval else "—"
    p = "—" if c.p is None else (f"{c.p:.3f}" if c.p >= 0.001 else "<0.001")
    cells = [interval, p, c.better or "—", verdict_text(report, row), pairs_text(c),
             "" if c.detectable is None else f"{c.detectable:{spec}}"]
    if report.design.sequential:
        cells.append("" if c.decided_at is None else f"{c.decided_at} seeds")
    if report.design.margin is not None:  # a plan for the rows still open
        cells.append("" if said(c.verdict, *DECIDED) else seeds_range(c.seeds_for_margin))
    return cells


def legend(report: Report) -> str:
    """What the numbers mean."""
    better = "lower" if report.goal == "minimize" else "higher"
    d = report.design
    alpha = f"{d.alpha:.0%}"
    text = (f"Mean ± sample std over the finished seeds of each variant (final value, else best); runs = finished/"
            f"planned; failed = failed/ended runs (an exception, or a NaN or infinite {report.metric}) and the first "
            f"error. Δ = {report.metric} of the row minus {_base_phrase(report)}, over the seeds both "
            f"finished ({report.goal}: {better} is better). {interval_header(report)}: {d.describe()}. Each interval "
            f"is its row's test inverted (paired t on the seeds both ended; Welch's t when fewer than two pairs), "
            f"at the row's share of the error, so the verdicts of the table are wrong together with probability at "
            f"most {alpha}. Verdicts: better / worse: the interval excludes 0")
    if d.margin is not None:
        text += (f"; equivalent: it lies inside ±{d.margin} (the sweep's margin); not worse / not better: it "
                 f"excludes a loss / a gain of the margin")
    text += ("; undecided (|Δ| < x): every Δ the interval allows is within ±x. p (adj.): the smallest family error "
             "at which the interval would exclude 0. seeds better: seeds on which the row beat the base (paired), "
             f"else P(row beats base) over all pairs of runs (Agarwal et al. 2021). detectable Δ: the smallest |Δ| "
             f"the row's test finds with {POWER:.0%} power, its sd at a {SD_CONFIDENCE:.0%} upper confidence bound.")
    if d.sequential:
        text += (" decided at: the seeds at the look that decided the row (no seed is added to it after); a row "
                 "still undecided got seeds up to the budget.")
    if d.margin is not None:
        text += (f" seeds for ±{d.margin} (rows not yet decided): seeds a fixed design needs to decide the margin "
                 f"with {POWER:.0%} power (sd as observed – at its upper bound).")
    if any(row.n_failed for row in report.variants):
        text += (" A row that fails more often than the base is never found better, equivalent or not worse from its "
                 "survivors alone, its luckier seeds (nor the base from its); what they prove against it stands. Once "
                 "a row or the base has a failed run, half of its remaining error goes to Fisher's exact test of the "
                 "failure counts, which can decide the row on that ground.")
    if any(c.interim for row in report.variants if (c := row.comparison)):
        text += " interim: runs are still going; the verdict is final once every planned run has ended."
    if any(LENGTH.match(k) for k in report.metric_keys):
        text += (" val loss Nx: val loss on blocks N times the training length, the same tokens at every N "
                 "(ablate evaluate).")
        reasons = sorted({why for run in report.runs for why in run.notes.values()})
        if reasons:
            text += " cannot: " + "; ".join(reasons) + "."
    if report.effects:
        text += (" Effects: a main effect is a level against its factor's reference, averaged over the other "
                 "factor's levels; a simple effect, at one level of the other; an interaction is the difference of "
                 "two simple effects (Y(a, b) - Y(a0, b) - Y(a, b0) + Y(a0, b0), per seed): it excludes 0 when the "
                 "effect of one factor depends on the other.")
    if report.trends:
        text += (" Across sizes: Δ per doubling is the least-squares slope of the row's Δ against log2 of the base's "
                 "parameter count, per seed; grows / shrinks: it excludes 0 and |Δ| increases / decreases with size; "
                 "flips sign: better at one size and worse at another; consistent: the same verdict at every size.")
    if any(row.leaks_labels for row in report.variants):
        text += (" Rows marked 'leaks labels' score positions that see their own labels: "
                 "their losses are not comparable.")
    matched = [row for row in report.variants if row.matched]
    if matched:
        m = matched[0].matched
        text += (f" Matched budget: {m['budget']} held to the base's by re-solving {m['by']} "
                 f"(within {max(abs(r.matched['error']) for r in matched):.2%}).")
    return text


def _base_phrase(report: Report) -> str:
    if len(report.strata) > 1:
        return "the base row at the same values of the other factors (its stratum: the block it is in)"
    return f"the base '{report.base_variant}'"


def design_note(report: Report) -> str:
    """The design in one line: family, level, seeds, margin."""
    margin = f"; margin ±{report.design.margin}" if report.design.margin is not None else "; no margin declared"
    return report.design.describe() + margin


def notes(report: Report) -> list[str]:
    """One line per row whose verdict needs a reason (failed runs, too few seeds, no spread, runs stopped early), and
    one per row whose per-seed differences are strongly skewed."""
    compared = [row for row in report.variants if row.comparison is not None and not row.leaks_labels]
    return [f"{row.name}: {row.comparison.reason}." for row in compared if row.comparison.reason] + \
        [skew_note(row.name, row.comparison, report.design.rows) for row in compared if row.comparison.skewed]


def skew_note(name: str, c: Comparison, rows: int) -> str:
    """Why a row's interval may be off: its per-seed differences are skewed (:mod:`ablate.stats.skew`), and what
    the exact sign-flip test, which needs no normality, says instead."""
    flip = "" if c.sign_flip_p is None else (
        f"; the exact sign-flip test, which needs no normality, gives p (adj.) = {c.sign_flip_p:.3g} over the "
        f"2^{c.n} sign patterns (never below {min(1.0, 2 / 2 ** c.n * max(1, rows)):.3g} at {c.n} seeds)")
    return (f"{name}: per-seed differences strongly skewed (G1 = {c.skew:+.2f}, beyond what normal differences "
            f"reach in 1% of sweeps at {c.n} seeds: a seed far from the rest, or a skewed spread): the t interval "
            f"assumes roughly symmetric differences{flip}.")


def precision_note(report: Report) -> list[str]:
    """A line when the runs trained at different precisions (``trainer.precision=auto`` on a mix of machines):
    the Δs between them then include the precision's effect."""
    used = Counter(run.precision for run in report.runs if run.precision)
    if len(used) < 2:
        return []
    counts = ", ".join(f"{precision}: {n}" for precision, n in used.most_common())
    return [f"mixed precision: the runs trained in different precisions ({counts}); a Δ between them includes the "
            "precision's effect (set trainer.precision to one value to compare like with like)."]


def fused_note(report: Report) -> list[str]:
    """A line when runs trained as members of seed arrays (:mod:`ablate.train.array`): how many, and that their wall
    time is their array's (shared by its members, not one run's)."""
    fused = [run for run in report.runs if run.fused]
    if not fused:
        return []
    arrays = len({run.fused.get("array") for run in fused})
    return [f"seed arrays: {len(fused)} of {len(report.runs)} runs trained fused, in {arrays} array"
            f"{'s' * (arrays != 1)}; a fused run's wall time is its array's, shared with the other members."]


def status_note(report: Report) -> str:
    """``7 runs: 4 finished, 1 failed, 1 running, 1 pending.``"""
    counts = report.status_counts()
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: kv[0] != Status.FINISHED))
    return f"{len(report.runs)} runs: {parts}." if report.runs else "The plan has no runs."
