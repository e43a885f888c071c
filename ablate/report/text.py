"""The report as text for reading: the displayed table's titles and cells, the legend and the notes.

The columns are :mod:`ablate.report.columns`'s table and their cells :mod:`ablate.report.cells`'s; display cells
round numbers for reading, while :mod:`ablate.report.records` keeps full precision for the CSV files and the W&B
table.
"""

from __future__ import annotations

from collections import Counter

from ablate.report.cells import FORMATS, MAX_ERROR, NUMBER, interval_header, label  # noqa: F401 (read from here too)
from ablate.report.columns import displayed
from ablate.report.table import LENGTH, Report, VariantRow
from ablate.runs.status import Status
from ablate.stats.compare import Comparison
from ablate.stats.planning import POWER, SD_CONFIDENCE
from ablate.stats.design import MINIMIZE


def display_headers(report: Report) -> list[str]:
    """The titles of the displayed table's columns (every one that applies to the design)."""
    return [column.title for column in displayed(report)]


def display_cells(report: Report, row: VariantRow, *, error_limit: int | None = MAX_ERROR) -> list[str]:
    """One variant's displayed cells, aligned with :func:`display_headers`."""
    return [column.cell(row) for column in displayed(report, error_limit=error_limit)]


def legend(report: Report) -> str:
    """What the numbers mean."""
    better = "lower" if report.goal == MINIMIZE else "higher"
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
                 "still undecided got seeds up to the budget. Every column of a row reads the seeds its verdicts "
                 "read: those of the look that decided it, else of its last complete look (the base: the most any "
                 "of its rows read); ahead, not read: its runs that ended beyond them (seeds started ahead of a "
                 "look while a worker would have idled), in no other column until a later look reads them.")
    if d.margin is not None:
        text += (f" seeds for ±{d.margin} (rows not yet decided): seeds a fixed design needs to decide the margin "
                 f"with {POWER:.0%} power (sd as observed – at its upper bound).")
    if any(row.n_failed for row in report.variants):
        text += (" A row that fails more often than the base is never found better, equivalent or not worse from its "
                 "survivors alone, its luckier seeds (nor the base from its); what they prove against it stands. Once "
                 "a row or the base has a failed run, half of its remaining error goes to Fisher's exact test of the "
                 "failure counts, which can decide the row on that ground.")
    if report.also_judged:
        others = ", ".join(j.name for j in report.also_judged)
        text += (f" Every row is also judged on {others}: its Δ (row minus base), interval and verdict, read as "
                 f"above, with that metric's goal and margin; the family's error is shared over rows x metrics. A "
                 f"sequential design adds seeds to a row until each of its metrics is decided.")
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
    """The design in one line: family, level, seeds, margin (each judged metric's, when there are several)."""
    if report.also_judged:
        margins = ", ".join(f"{j.name} ±{j.margin}" if j.margin is not None else f"{j.name} none"
                            for j in report.judged)
        return f"{report.design.describe()}; margins {margins}"
    margin = f"; margin ±{report.design.margin}" if report.design.margin is not None else "; no margin declared"
    return report.design.describe() + margin


def notes(report: Report) -> list[str]:
    """One line per row whose verdict needs a reason (failed runs, too few seeds, no spread, runs stopped early), and
    one per row whose per-seed differences are strongly skewed."""
    compared = [row for row in report.variants if row.comparison is not None and not row.leaks_labels]
    others = [(f"{row.name} ({name})", c) for row in report.variants if not row.leaks_labels
              for name, c in row.judged.items()]  # the other judged metrics' comparisons, named
    every = [(row.name, row.comparison) for row in compared] + others
    return [f"{name}: {c.reason}." for name, c in every if c.reason] + \
        [skew_note(name, c, report.design.rows) for name, c in every if c.skewed] + ahead_note(report)


def ahead_note(report: Report) -> list[str]:
    """A line naming the runs that ended beyond the seeds their rows' verdicts read (a sequential design's seeds
    started ahead of a look), which no column counts."""
    ahead = [f"{row.name} seed{'s' * (len(row.ahead) > 1)} {', '.join(str(run.seed) for run in row.ahead)}"
             for row in report.variants if row.ahead]
    if not ahead:
        return []
    n = sum(len(row.ahead) for row in report.variants)
    return [f"ahead, not read: {'; '.join(ahead)} ({n} run{'s' * (n > 1)} that ended beyond the seeds their row's "
            "verdicts read, started ahead of a look while a worker would have idled: no other column counts "
            f"{'them' if n > 1 else 'it'}; a later look, if one comes, reads {'them' if n > 1 else 'it'})."]


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
