"""The report as text: display cells shared by every format, Markdown, aligned plain text, CSV.

Display cells round numbers for reading; the CSV files (and the W&B table) keep full precision,
with separate mean, std and n columns, so they can be read back exactly.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from ablate.report.stats import ALPHA, POWER, UNTESTED
from ablate.report.table import BLEU, LENGTH, TEST_BLEU, Report, Stat, VariantRow

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


LEAKS = "not comparable: its mask leaks labels"
CONFIDENCE = f"{1 - ALPHA:.0%}"
FEW_SEEDS = 5  # below this many runs on a side, a bootstrap interval is marked as too narrow


def display_headers(report: Report) -> list[str]:
    """Column titles of the displayed table."""
    metrics = [label(key) for key in report.metric_keys]
    return ["variant", *short_labels(report.varied_keys), "params", *metrics,
            f"Δ {label(report.metric)}", f"{CONFIDENCE} CI", "p (Holm)", "P(better)", "verdict",
            "seeds needed", "tokens/s", "wall time", "runs", "failures"]


def text_columns(report: Report) -> set[int]:
    """Displayed columns aligned left: the variant, varied keys with a text value, the failures."""
    words = {1 + i for i, key in enumerate(report.varied_keys)
             if any(isinstance(row.varied.get(key), str) for row in report.variants)}
    return {0, *words, len(display_headers(report)) - 1}


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
    failures = f"{row.n_failed}: {one_line(row.first_error, error_limit)}" if row.n_failed else ""
    return [row.name, *(format_value(row.varied.get(k)) for k in report.varied_keys), format_count(row.parameters),
            *metrics, delta, *comparison_cells(row, spec), format_count(row.tokens_per_s.mean if row.tokens_per_s else None),
            format_duration(row.wall_time_s.mean if row.wall_time_s else None),
            f"{row.n_finished}/{row.n_runs}", failures]


def comparison_cells(row: VariantRow, spec: str) -> list[str]:
    """The interval of Δ, the Holm-corrected p-value, P(better), the verdict and the seeds a verdict needs."""
    if row.is_base:
        return ["", "", "", "base", ""]
    c = row.comparison
    if c is None:
        return ["—", "—", "—", "—" if not row.leaks_labels else LEAKS, ""]
    few = "*" if min(c.n, c.m) < FEW_SEEDS else ""
    interval = f"[{c.interval[0]:+{spec}}, {c.interval[1]:+{spec}}]{few}" if c.interval else "—"
    p = "—" if c.p_holm is None else (f"{c.p_holm:.3f}" if c.p_holm >= 0.001 else "<0.001")
    verdict = LEAKS if row.leaks_labels else (f"{UNTESTED} (n={c.n}, base n={c.m})" if c.verdict == UNTESTED
                                              else c.verdict)
    needed = "" if c.seeds_needed is None else str(c.seeds_needed)
    return [interval, p, f"{c.prob_improvement:.2f}", verdict, needed]


def legend(report: Report) -> str:
    """What the numbers mean."""
    better = "lower" if report.goal == "minimize" else "higher"
    text = (f"Mean ± sample std over the finished seeds of each variant (final value, else best); "
            f"runs = finished/planned; Δ = {report.metric} mean minus the base variant "
            f"'{report.base_variant}' ({report.goal}: {better} is better), per seed when both ran the same seeds; "
            f"{CONFIDENCE} CI: percentile bootstrap of Δ over seeds; p: paired (same seeds) or Welch t-test, "
            f"Holm-corrected across the rows; verdict at alpha = {ALPHA}; P(better): probability of improvement "
            f"(Agarwal et al. 2021); seeds needed: per variant, for {POWER:.0%} power against the observed Δ.")
    if any(row.comparison and row.comparison.interval and min(row.comparison.n, row.comparison.m) < FEW_SEEDS
           for row in report.variants):
        text += (f" * Fewer than {FEW_SEEDS} seeds on a side: the bootstrap only resamples the values it has, so the "
                 "interval is narrower than the uncertainty; the verdict (t-test) is the answer.")
    if any(LENGTH.match(k) for k in report.metric_keys):
        text += (" val loss Nx: val loss on blocks N times the training length, the same tokens at every N "
                 "(ablate evaluate).")
        reasons = sorted({why for run in report.runs for why in run.notes.values()})
        if reasons:
            text += " cannot: " + "; ".join(reasons) + "."
    if any(row.leaks_labels for row in report.variants):
        text += " Rows marked 'leaks labels' score positions that see their own labels: their losses are not comparable."
    matched = [row for row in report.variants if row.matched]
    if matched:
        m = matched[0].matched
        text += (f" Matched budget: {m['budget']} held to the base's by re-solving {m['by']} "
                 f"(within {max(abs(r.matched['error']) for r in matched):.2%}).")
    return text


def status_note(report: Report) -> str:
    """``7 runs: 4 finished, 1 failed, 1 running, 1 pending.``"""
    counts = report.status_counts()
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: kv[0] != "finished"))
    return f"{len(report.runs)} runs: {parts}." if report.runs else "The plan has no runs."


def format_markdown(report: Report) -> str:
    """A Markdown document: title, the table, the legend and the status of the runs."""
    headers = display_headers(report)
    left = text_columns(report)
    lines = [f"# {report.name}: {report.metric} ({report.goal})", "", f"{report.date} · {status_note(report)}", "",
             "| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i in left else "---:" for i in range(len(headers))) + "|"]
    for row in report.variants:
        cells = [cell.replace("|", "\\|") for cell in display_cells(report, row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", legend(report), ""])


def format_terminal(report: Report) -> str:
    """The table as aligned plain text, for printing: text columns left, numbers right.

    Args:
        report: from :func:`ablate.report.build_report`.

    Returns:
        A title line, the table, the legend, the run counts and each failed variant's error.
    """
    headers = display_headers(report)
    rows = [display_cells(report, row) for row in report.variants]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    left = text_columns(report)

    def line(cells: list[str]) -> str:
        padded = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return "  ".join(padded).rstrip()

    out = [f"{report.name}: {report.metric} ({report.goal})  {report.date}", "",
           line(headers), line(["-" * w for w in widths]), *map(line, rows), "", legend(report), status_note(report)]
    out += [f"failed in {row.name}: {one_line(row.first_error)}" for row in report.variants if row.n_failed]
    return "\n".join(out) + "\n"


def _stat_fields(stat: Stat | None) -> list[Any]:
    return [stat.mean, stat.std, stat.n] if stat else [None, None, 0]


COMPARISON = ("ci_low", "ci_high", "p", "p_holm", "paired", "prob_improvement", "verdict", "seeds_needed",
              "leaks_labels", "matched_by", "matched_value")


def table_columns(report: Report) -> list[str]:
    """Columns of the machine-readable variant table (table.csv, the W&B table)."""
    stats = [f"{key}_{part}" for key in report.metric_keys for part in ("mean", "std", "n")]
    return ["variant", "is_base", "status", *report.varied_keys, "parameters", "runs", "finished", "failed",
            *stats, f"{report.metric}_delta", *COMPARISON, "tokens_per_s_mean", "tokens_per_s_std", "tokens_per_s_n",
            "wall_time_s_mean", "wall_time_s_std", "wall_time_s_n", "first_error"]


def _comparison_fields(row: VariantRow) -> list[Any]:
    c, m = row.comparison, row.matched or {}
    fields = [None] * 8 if c is None else [
        *(c.interval or (None, None)), c.p, c.p_holm, c.paired, c.prob_improvement, c.verdict, c.seeds_needed]
    if row.is_base:
        fields[6] = "base"
    return [*fields, row.leaks_labels, m.get("by"), m.get("value")]


def table_records(report: Report) -> list[list[Any]]:
    """One list of raw values per variant, aligned with :func:`table_columns`; None where unknown."""
    return [[row.name, row.is_base, row.status, *(row.varied.get(k) for k in report.varied_keys), row.parameters,
             row.n_runs, row.n_finished, row.n_failed,
             *(x for key in report.metric_keys for x in _stat_fields(row.metrics[key])), row.delta,
             *_comparison_fields(row), *_stat_fields(row.tokens_per_s), *_stat_fields(row.wall_time_s), row.first_error]
            for row in report.variants]


def run_columns(report: Report) -> list[str]:
    """Columns of runs.csv: identity, status, headline value, every final and best metric."""
    final = sorted({k for run in report.runs for k in run.final})
    best = sorted({k for run in report.runs for k in run.best})
    return ["id", "variant", "seed", *report.varied_keys, "status", "step", "parameters", report.metric,
            *(f"final/{k}" for k in final), *(f"best/{k}" for k in best), "tokens_per_s", "wall_time_s",
            "run_dir", "error"]


def run_records(report: Report) -> list[list[Any]]:
    """One list of raw values per run, in plan order, aligned with :func:`run_columns`."""
    final = sorted({k for run in report.runs for k in run.final})
    best = sorted({k for run in report.runs for k in run.best})
    return [[run.id, run.variant, run.seed, *(run.varied.get(k) for k in report.varied_keys), run.status, run.step,
             run.parameters, run.value(report.metric), *(run.final.get(k) for k in final),
             *(run.best.get(k) for k in best), run.tokens_per_s, run.wall_time_s,
             _relative(run.run_dir, report), run.error]
            for run in report.runs]


def _relative(path: Any, report: Report) -> str:
    try:
        return str(path.relative_to(report.sweep_dir))
    except ValueError:
        return str(path)


def to_csv(columns: list[str], records: list[list[Any]]) -> str:
    """CSV text; None is an empty cell, floats keep every digit (``repr``), so values read back exactly."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([["" if v is None else v for v in record] for record in records])
    return buf.getvalue()
