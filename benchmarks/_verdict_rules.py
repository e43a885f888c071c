"""Rules compared for ``verdicts.py``: the failure guard before and after issue 40 and how bounds were printed, on
tables with failed runs and a margin; and rules for skewed noise (the t interval at its level, at half its level on a
row flagged skewed, at half its level on every row), error and power side by side.

Everything runs ``ablate.stats`` itself (vectorised over tables); the rule before issue 40 is the old guard patched in
(:func:`guard_before`), everything else is today's code.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import re
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np

from ablate.report import bounds
from ablate.stats import skew
from ablate.stats import verdict as V
from ablate.stats.design import Design, Margin
from ablate.stats.judge import Judgement, judge_paired

# The issue's setting: 400 tables of 3 rows and 10 seeds, every run failing with probability 0.1, a margin of 0.06;
# per-seed differences with sd 0.01 (val loss), true Δ of each row uniform on ±the margin.
TABLES, ROWS, SEEDS, FAIL, MARGIN, SD, SPEC = 400, 3, 10, 0.1, 0.06, 0.01, ".3f"


def guard_before(lo, hi, goal, margin, row_failed, row_runs, base_failed, base_runs):
    """The guard before issue 40: a verdict favouring the side that fails more often was made *undecided*, whatever
    else its interval proved (an *equivalent* interval excluding 0 included)."""
    codes = V.from_interval(lo, hi, goal, margin)
    row_more = np.asarray(row_failed) * np.asarray(base_runs) > np.asarray(base_failed) * np.asarray(row_runs)
    base_more = np.asarray(base_failed) * np.asarray(row_runs) > np.asarray(row_failed) * np.asarray(base_runs)
    withheld = (row_more & np.isin(codes, (V.BETTER, V.EQUIVALENT, V.NOT_WORSE))) | \
        (base_more & np.isin(codes, (V.WORSE, V.EQUIVALENT, V.NOT_BETTER)))
    return np.where(withheld, V.UNDECIDED, codes)


def rule(name: str):
    """The guard of rule ``before`` (patched in) or ``after`` (today's)."""
    return mock.patch.object(V, "guard", guard_before) if name == "before" else contextlib.nullcontext()


def _fail(rng, values, rate=FAIL):
    return np.where(rng.random(values.shape) < rate, np.nan, values)


def _table(rng, sims, deltas, rows=ROWS, sd=SD):
    """The base (sims, SEEDS) and each row, seeds correlated 0.8 between sides, per-seed differences of sd ``sd``."""
    side = sd / np.sqrt(2 * 0.2)
    seed = rng.normal(0, side * np.sqrt(0.8), (sims, SEEDS))
    noise = side * np.sqrt(0.2)
    base = seed + rng.normal(0, noise, (sims, SEEDS))
    return base, [seed + deltas[:, r:r + 1] + rng.normal(0, noise, (sims, SEEDS)) for r in range(rows)]


def names_direction(j: Judgement) -> np.ndarray:
    """The statement says better or worse: as its verdict, or beside *equivalent* (the interval excludes 0)."""
    return np.isin(j.verdict, (V.BETTER, V.WORSE)) | ((j.verdict == V.EQUIVALENT) & (j.lo * j.hi > 0))


def overturnable(j: Judgement, goal: str) -> np.ndarray:
    """The interval excludes 0 on the side of whichever fails more often: its survivors alone say so."""
    row_more = j.row_failed * j.base_runs > j.base_failed * j.runs
    base_more = j.base_failed * j.runs > j.row_failed * j.base_runs
    row_better = (j.hi < 0) if goal == "minimize" else (j.lo > 0)
    row_worse = (j.lo > 0) if goal == "minimize" else (j.hi < 0)
    return (row_more & row_better) | (base_more & row_worse)


def misprinted(j: Judgement, before: bool, lines) -> np.ndarray:
    """Rows whose printed interval (the old ``+.3f``, or :func:`ablate.report.bounds.interval`) has a bound on one of
    ``lines`` (a function of the margin), or across it, where the bound itself is not."""
    out = np.zeros(len(j.lo), bool)
    for i, (a, b, m) in enumerate(zip(j.lo, j.hi, j.margin)):
        if np.isnan(a):
            continue
        text = f"[{a:+{SPEC}}, {b:+{SPEC}}]" if before else bounds.interval(a, b, SPEC, m)
        shown = [float(x) for x in text.strip("[]").split(", ")]
        out[i] = any(np.sign(s - t) != np.sign(v - t) for s, v in zip(shown, (a, b)) for t in lines(m))
    return out


def issue_counts(seed: int = 40) -> list[list]:
    """The issue's 400 tables, before and after: counts of rows (of 1,200)."""
    rng = np.random.default_rng(seed)
    deltas = rng.uniform(-MARGIN, MARGIN, (TABLES, ROWS))
    base, rows = _table(rng, TABLES, deltas)
    base, rows = _fail(rng, base), [_fail(rng, x) for x in rows]
    counts = {}
    for name in ("before", "after"):
        c = dict.fromkeys(LABELS, 0)
        with rule(name):
            for x in rows:
                j = judge_paired(x, base, Design(rows=ROWS, margin=Margin(MARGIN)), "minimize")
                plain = judge_paired(x, base, Design(rows=ROWS), "minimize")
                excludes = (j.lo > 0) | (j.hi < 0)
                c["excludes"] += np.sum(excludes)
                c["undecided"] += np.sum(excludes & (j.verdict == V.UNDECIDED))
                c["unsaid"] += np.sum(excludes & ~names_direction(j) & ~overturnable(j, "minimize"))
                c["hidden"] += np.sum((j.verdict == V.UNDECIDED) & np.isin(plain.verdict, (V.BETTER, V.WORSE)))
                c["unproven"] += np.sum(~excludes & names_direction(j) & ~j.on_failures)
                said = names_direction(j)
                c["printed 0"] += np.sum(said & misprinted(j, name == "before", lambda m: (0.0,)))
                c["printed m"] += np.sum(misprinted(j, name == "before", lambda m: bounds.lines(m)[1:]))
        counts[name] = c
    return [[f"{ISSUE}: {label}", int(counts["before"][k]), "before | after", int(counts["after"][k])]
            for k, label in LABELS.items()]


ISSUE = f"issue 40 setting ({TABLES} tables, {TABLES * ROWS} rows)"
LABELS = {"excludes": "rows whose interval excludes 0",
          "undecided": "interval excludes 0, verdict undecided",
          "unsaid": "interval excludes 0 on a side the failures cannot overturn, no better/worse said",
          "hidden": "undecided with the margin, better/worse without it (the same folder)",
          "unproven": "better/worse said, interval does not exclude 0 (not from the failure counts)",
          "printed 0": f"better/worse said, a printed bound ({SPEC}) on or across 0",
          "printed m": f"a printed bound ({SPEC}) on or across ±m where it is not"}


def _false(j: Judgement, delta: float, margin: float) -> np.ndarray:
    """A statement the true Δ (minimize) contradicts: a verdict, or the direction an *equivalent* interval names."""
    gain = -delta
    says_better = (j.verdict == V.BETTER) | ((j.verdict == V.EQUIVALENT) & (j.hi < 0))
    says_worse = (j.verdict == V.WORSE) | ((j.verdict == V.EQUIVALENT) & (j.lo > 0))
    return (says_better & (gain <= 0)) | (says_worse & (gain >= 0)) | \
        (np.isin(j.verdict, (V.EQUIVALENT,)) & (abs(gain) >= margin)) | \
        ((j.verdict == V.NOT_WORSE) & (gain <= -margin)) | ((j.verdict == V.NOT_BETTER) & (gain >= margin))


def family_error(rng, sims: int) -> list[list]:
    """Some statement of the table false, before | after: 3 null rows with random failures and a margin (fixed and
    sequential), and a row worse by the margin whose bad seeds fail half the time."""
    out = []
    designs = {"fixed 10": Design(rows=ROWS, margin=Margin(MARGIN)),
               "sequential 3→10": Design(rows=ROWS, margin=Margin(MARGIN), first=(0, 1, 2), max_seeds=SEEDS)}
    for fail in (0.1, 0.2):
        for label, design in designs.items():
            base, rows = _table(rng, sims, np.zeros((sims, ROWS)))
            base, rows = _fail(rng, base, fail), [_fail(rng, x, fail) for x in rows]
            measured = {}
            for name in ("before", "after"):
                wrong, unsaid = np.zeros(sims, bool), np.zeros(sims, bool)
                with rule(name):
                    for x in rows:
                        j = judge_paired(x, base, design, "minimize")
                        wrong |= _false(j, 0.0, MARGIN)
                        excludes = (j.lo > 0) | (j.hi < 0)
                        unsaid |= excludes & ~names_direction(j) & ~overturnable(j, "minimize")
                measured[name] = (wrong.mean(), unsaid.mean())
            out.append([f"{fail:.0%} of runs fail, 3 null rows, margin, {label}: some statement false (before | after)",
                        measured["before"][0], "≤ 0.05", f"{measured['after'][0]:.4f}"])
            out.append([f"{fail:.0%} of runs fail, {label}: a table with a proven direction unsaid (before | after)",
                        measured["before"][1],
                        "never", f"{measured['after'][1]:.4f}"])
    base, (x,) = _table(rng, sims, np.full((sims, 1), MARGIN), rows=1)
    x = np.where((x > base + MARGIN) & (rng.random(x.shape) < 0.5), np.nan, x)
    favours = {}
    for name in ("before", "after"):
        with rule(name):
            j = judge_paired(x, base, Design(rows=1, margin=Margin(MARGIN)), "minimize")
        favours[name] = np.isin(j.verdict, (V.BETTER, V.EQUIVALENT, V.NOT_WORSE)).mean()
    out.append(["a row worse by the margin, its bad seeds fail half the time: equivalent, not worse or better "
                "(before | after)", favours["before"], "≤ 0.05", f"{favours['after']:.4f}"])
    return out


SKEW_SEEDS = (3, 5, 10, 20, 40, 80)
SKEW_RULES = ("t at the row's level", "half the level where flagged skewed", "half the level on every row")


def skew_rules(rng, sims: int) -> list[list]:
    """Lognormal rows against a normal base (3 rows): some verdict false with equal means, and the power to call a
    row better by 1 sd of the per-seed difference, lognormal and normal noise of the same sd, for each rule."""
    sd_row = np.sqrt((np.e - 1) * np.e)  # the lognormal(0, 1)'s sd
    shift = np.sqrt(1 + sd_row ** 2)  # 1 sd of the per-seed difference
    draws = {"lognormal": lambda size: rng.lognormal(0, 1, size) - np.exp(0.5),
             "normal": lambda size: rng.normal(0, sd_row, size)}
    out = []
    for n in SKEW_SEEDS:
        error = {r: np.zeros(sims, bool) for r in SKEW_RULES}
        power = {(r, shape): 0.0 for r in SKEW_RULES for shape in draws}
        for shape, draw in draws.items():
            for effect in (0.0, shift) if shape == "lognormal" else (shift,):
                base = rng.normal(0, 1, (sims, n))
                for _ in range(3):
                    x = draw((sims, n)) - effect
                    full = judge_paired(x, base, Design(rows=3), "minimize").verdict
                    half = judge_paired(x, base, Design(alpha=0.025, rows=3), "minimize").verdict
                    flagged = np.abs(skew.skewness(x - base)) > skew.threshold(n)
                    for r, codes in zip(SKEW_RULES, (full, np.where(flagged, half, full), half)):
                        if effect:
                            power[r, shape] += np.mean(codes == V.BETTER) / 3
                        else:
                            error[r] |= np.isin(codes, (V.BETTER, V.WORSE))
        for r in SKEW_RULES:
            out.append([f"skewed, n={n}, {r}: some verdict false | power at 1 sd, lognormal | normal",
                        error[r].mean(), "≤ 0.05", f"{power[r, 'lognormal']:.3f} | {power[r, 'normal']:.3f}"])
    return out



FORMAT_TABLES = 40  # the first of the issue's tables through the report's own path (about 1 s a table and rule)


def _old_interval(lo, hi, spec, margin=None):
    return f"[{lo:+{spec}}, {hi:+{spec}}]"


def _printed_rows(report, text: str, kind: str) -> dict[str, tuple[float, float, str]]:
    """Each compared row's printed interval and verdict, read back from one format's text."""
    out = {}
    for row in (r for r in report.variants if r.comparison is not None and r.comparison.interval):
        if kind == "html":
            line = next(x for x in text.split("<tr") if f'<td class="text">{row.name}</td>' in x)
            cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", line)]
            cells = [re.sub(r"<[^>]+>", "", c) for c in cells]
        else:
            line = next(x for x in text.splitlines() if x.startswith(("| " if kind == "markdown" else "") + row.name))
            cells = [c.strip() for c in (line.split(" | ") if kind == "markdown" else re.split(r"\s{2,}", line))]
        at = next(i for i, c in enumerate(cells) if re.fullmatch(r"\[\S+, \S+\]", c))
        lo, hi = (float(x) for x in cells[at].strip("[]").split(", "))
        said = cells[at + 1].rstrip(" |")
        out[row.name] = (lo, hi, said.split(" ", 1)[1] if kind == "markdown" else said)  # after Markdown's mark
    return out


def formats(seed: int = 40, tables: int = FORMAT_TABLES) -> list[list]:
    """The issue's first tables written as sweep folders and read by ``ablate report``'s own code, before and after:
    in each format (terminal, Markdown, the HTML verdict table, table.csv), rows whose printed interval excludes 0
    on a side the failures cannot overturn while the printed verdict names no direction, and rows whose verdict
    names a direction beside a printed bound on or across 0."""
    from ablate.report import build_report, format_markdown, format_terminal
    from ablate.report.html import variant_table
    from ablate.report.records import table_columns, table_records, to_csv
    from tests.report.test_verdicts import make

    rng = np.random.default_rng(seed)
    deltas = rng.uniform(-MARGIN, MARGIN, (TABLES, ROWS))
    base, rows = _table(rng, TABLES, deltas)
    base, rows = _fail(rng, base), [_fail(rng, x) for x in rows]
    counts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("before", "after"):
            old = mock.patch.object(bounds, "interval", _old_interval) if name == "before" else \
                contextlib.nullcontext()
            c = {(k, f): 0 for k in ("unsaid", "unproven") for f in ("terminal", "markdown", "html", "csv")}
            with rule(name), old:
                for t in range(tables):
                    values = {"base": [(s, "failed" if np.isnan(v) else float(v)) for s, v in enumerate(base[t])]}
                    values.update({f"r{r}": [(s, "failed" if np.isnan(v) else float(v)) for s, v in enumerate(x[t])]
                                   for r, x in enumerate(rows)})
                    report = build_report(make(Path(tmp) / f"{name}-{t}", values,
                                               design=Design(margin=Margin(MARGIN))))
                    texts = {"terminal": format_terminal(report), "markdown": format_markdown(report),
                             "html": variant_table(report, wide=False)}
                    printed = {kind: _printed_rows(report, text, kind) for kind, text in texts.items()}
                    written = csv.DictReader(io.StringIO(to_csv(table_columns(report), table_records(report))))
                    printed["csv"] = {r["variant"]: (float(r["ci_low"]), float(r["ci_high"]), r["verdict"])
                                      for r in written if r["ci_low"]}
                    for row in (r for r in report.variants if r.comparison is not None and r.comparison.interval):
                        cmp = row.comparison
                        rf, runs, bf, base_runs = cmp.failed
                        for kind, found in printed.items():
                            lo, hi, said = found[row.name]
                            direction = said.startswith(("better", "worse")) or \
                                re.search(r"\((better|worse), by less", said) is not None
                            excludes = lo > 0 or hi < 0
                            more = (rf * base_runs > bf * runs, bf * runs > rf * base_runs)  # row, base
                            overturn = (more[0] and hi < 0) or (more[1] and lo > 0)
                            c["unsaid", kind] += excludes and not direction and not overturn
                            c["unproven", kind] += direction and not excludes and not cmp.on_failures
            counts[name] = c
    labels = {"unsaid": "printed interval excludes 0 (not on the failures' side), no better/worse printed",
              "unproven": "better/worse printed beside a bound printed on or across 0 (not from the failure counts)"}
    return [[f"issue 40 setting, first {tables} tables through the report, {kind}: {label}",
             int(counts["before"][k, kind]), "before | after", int(counts["after"][k, kind])]
            for k, label in labels.items() for kind in ("terminal", "markdown", "html", "csv")]
