"""The documented figures of ``verdicts.py``, rendered from its record (``benchmarks/verdicts.json``): the README's
calibration rows and docs/verdicts.md's tables. tests/stats/test_documented.py checks that the documents hold these
exact lines, so each figure has one owner: ``python benchmarks/verdicts.py --record`` writes the record and prints
them."""

from __future__ import annotations

import _verdict_metrics as several
from _verdict_rules import ISSUE, LABELS, SKEW_RULES, SKEW_SEEDS

SEEDS = (2, 3, 5, 10)
SHAPES = (3, 5, 10)
HYPERBAND = (("no effect, 10 seeds", "a null row noisier than the base, 10 seeds (4,000 tables)"),
             ("truly worse by 0.5, 20 seeds", "a row truly worse by 0.5, 20 seeds"))
WORSE_SEEDS = "the row's worse seeds fail half the time: called better"


def _first(value) -> float:
    return value[0] if isinstance(value, list) else value


def _joined(results: dict, keys, spec: str = ".3f", index: int = 0) -> str:
    return " / ".join(f"{(results[k] if isinstance(results[k], list) else [results[k]])[index]:{spec}}" for k in keys)


def readme_rows(results: dict) -> list[str]:
    """The README's lines whose figures come from the record ("How sure is this?": power, and what was simulated)."""
    r = results
    power = [r[f"power at Δ = {e} sd: fixed 10 seeds | sequential (mean seeds)"] for e in (1.0, 1.5, 2.0, 5.0)]
    cover = [f"coverage, 5 rows, n={n}, paired" for n in SEEDS]
    unpaired = [f"coverage, 5 rows, n={n}, unpaired (sd 4 vs 1)" for n in SEEDS]
    disagree = round(sum(r[k][1] for k in cover + unpaired) * 20_000)
    heavy = [f"t(3) noise, both sides, 3 null rows, n={n}: some verdict false | all cover" for n in SHAPES]
    skewed = [f"skewed, n={n}, {SKEW_RULES[0]}: some verdict false | power at 1 sd, lognormal | normal"
              for n in SHAPES]  # the rule the report follows, from the section that sets it beside the others
    lines = ["| power, fixed design, 10 seeds | " + " | ".join(f"{p[0]:.3f}" for p in power) + " |",
             "| power, sequential, 3 to 10 seeds | " + " | ".join(f"{p[1]:.3f}" for p in power) + " |",
             "| mean seeds used, sequential | " + " | ".join(f"{p[2]:.1f}" for p in power) + " |",
             f"| 5 rows' intervals cover their true Δ together, paired, n = 2 / 3 / 5 / 10 | {_joined(r, cover)} | "
             "≥ 0.95 |",
             f"| the same, unpaired (sd 4 vs 1, n vs n + 1 seeds) | {_joined(r, unpaired)} | ≥ 0.95 |",
             f"| an interval excluding 0 without a better/worse verdict, or the reverse | {disagree} of "
             f"{len(cover + unpaired) * 20_000:,} sweeps | never |",
             "| *equivalent* when the true Δ is exactly at the margin (2 rows), n = 3 / 5 / 10 | "
             f"{_joined(r, [f'equivalent when Δ = margin, 2 rows, n={n}' for n in SHAPES], '.4f')} | ≤ 0.025 |",
             "| sequential, 3 null rows, rows stopped at their first verdict: some verdict false | "
             f"{r['sequential 3→10 seeds, 3 null rows: some verdict false']:.3f} | ≤ 0.05 |",
             "| no spending: test again after each added seed, 3 to 10 | "
             f"{r['old rule: fixed test after each added seed, 3→10']:.3f} | (not controlled) |",
             "| 20 % of all runs diverge, 3 null rows: some verdict false (fixed / sequential) | " +
             _joined(r, [f"20% of runs diverge, 3 null rows, {d}: some verdict false"
                         for d in ("fixed 10", "sequential 3→10")]) + " | ≤ 0.05 |",
             "| a row's seeds that went worse fail half the time: the row called *better* | "
             f"{r[WORSE_SEEDS]:.3f} | ≤ 0.05 |",
             "| heavy tails (t with 3 df on both sides), 3 null rows: some verdict false, n = 3 / 5 / 10 | "
             f"{_joined(r, heavy)} | ≤ 0.05 |",
             f"| the same: all three intervals cover, n = 3 / 5 / 10 | {_joined(r, heavy, index=1)} | ≥ 0.95 |",
             "| skewed (lognormal rows, normal base, equal means), 3 null rows: some verdict false, n = 3 / 5 / 10 | "
             f"**{_joined(r, skewed)}** | ≤ 0.05: not met |",
             "| the same: some row flagged skewed, n = 3 / 5 / 10 (t(3): "
             f"{_joined(r, [f't(3) noise, both sides, n={n}: some row flagged skewed' for n in SHAPES])}; normal: "
             "0.01 a row) | "
             f"{_joined(r, [f'lognormal rows, normal base, n={n}: some row flagged skewed' for n in SHAPES])} | |"]
    for i, (scenario, label) in enumerate(HYPERBAND):
        said = f"hyperband, {scenario}: called better"
        first = "hyperband stops the worse half at the first validation, " if i == 0 else "the same, "
        lines.append(f"| {first}{label}: called *better* | {r[said + ' (report)']:.3f} (survivors only: "
                     f"{r[said + ' (survivors only)']:.3f}) | ≤ 0.05 |")
    return lines


def survivors_percent(results: dict) -> list[str]:
    """The hyperband rates of the survivors-only rule in whole percent, as the prose and the docstrings quote them."""
    return [f"{100 * _first(results[f'hyperband, {s}: called better (survivors only)']):.0f}" for s, _ in HYPERBAND]


def metrics_tables(results: dict) -> list[str]:
    """docs/verdicts.md's section on several metrics: the family's error over rows x metrics at each correlation, fixed
    and sequential, beside the naive rule, and the seeds per row; the speculative seeds' line; power per row."""
    rhos = several.S.RHOS
    error = ["| 3 rows x 2 metrics (val loss, BLEU) | " + " | ".join(f"ρ = {r:g}" for r in rhos) + " | stated |",
             "|---|" + "---:|" * (len(rhos) + 1)]
    for kind, label, stated in (("null", "3 null rows: some verdict false", "≤ 0.05"),
                                ("margin", "rows at 0, +m, −m, margins: some statement false", "≤ 0.05"),
                                ("naive", "each metric at 0.05 / 3 rows, not shared, 3 null rows: some verdict false",
                                 "(not controlled)")):
        for i, design in enumerate(("fixed 10 seeds", "sequential 3→10, joint rule")):
            figures = [results[several.KEYS[kind].format(rho=r)][i] for r in rhos]
            error.append(f"| {label}, {design} | " + " | ".join(f"{f:.4f}" for f in figures) + f" | {stated} |")
    for i, label in enumerate(("mean seeds per row, rows at 0, +m, −m, sequential: joint rule (both metrics)",
                               "the same, val loss alone (3 rows, the single-metric design)")):
        figures = [results[several.KEYS["seeds"].format(rho=r)][i] for r in rhos]
        error.append(f"| {label} | " + " | ".join(f"{f:.2f}" for f in figures) + " | |")
    differ, readings, spared = results[several.SPECULATIVE]
    speculative = (f"With 1 or 2 speculative seeds per row beyond its stop look ({spared:,.0f} of {readings / 2:,.0f} "
                   f"rows had one), {differ:.0f} of {readings:,.0f} readings (sweep x row x metric) changed verdict, Δ "
                   "or interval.")
    power = [f"| power per row at Δ = 1 sd (ρ = {several.POWER_RHO:g}) | fixed 10 | sequential 3→10 | mean seeds, "
             "sequential |", "|---|---:|---:|---:|"]
    for label, *_ in several.POWER:
        fixed, seq, seeds = results[several.power_key(label)]
        power.append(f"| {label} | {fixed:.3f} | {seq:.3f} | {seeds:.2f} |")
    return ["\n".join(error), speculative, "\n".join(power)]


def verdicts_tables(results: dict) -> list[str]:
    """docs/verdicts.md's tables: the issue's counts before and after, the family's error before and after, the
    skew rules' error and power side by side, and the section on several metrics (:func:`metrics_tables`)."""
    counts = ["| rows (of 1,200) | before | after |", "|---|---:|---:|"]
    counts += [f"| {label} | {results[f'{ISSUE}: {label}'][0]:.0f} | {results[f'{ISSUE}: {label}'][1]:.0f} |"
               for label in LABELS.values()]
    error = ["| 3 rows, margin 0.06, 10 seeds, 20,000 tables | before | after | stated |", "|---|---:|---:|---:|"]
    for key, value in results.items():
        if key.startswith(("10% of runs fail", "20% of runs fail", "a row worse by the margin")):
            label = key.replace(" (before | after)", "")
            error.append(f"| {label} | {value[0]:.4f} | {value[1]:.4f} | "
                         f"{'never' if 'unsaid' in label else '≤ 0.05'} |")
    skewed = ["| lognormal rows, normal base, 3 rows | " + " | ".join(f"n = {n}" for n in SKEW_SEEDS) + " |",
              "|---|" + "---:|" * len(SKEW_SEEDS)]
    for rule in SKEW_RULES:
        figures = [results[f"skewed, n={n}, {rule}: some verdict false | power at 1 sd, lognormal | normal"]
                   for n in SKEW_SEEDS]
        for i, what in enumerate(("some verdict false (equal means)", "power at 1 sd, lognormal noise",
                                  "power at 1 sd, normal noise")):
            skewed.append(f"| {rule}: {what} | " + " | ".join(f"{f[i]:.3f}" for f in figures) + " |")
    kinds = ("terminal", "markdown", "html", "csv")
    shown = ["| rows, as printed | " + " | ".join(f"{k}: before | after" for k in kinds) + " |",
             "|---|" + "---:|---:|" * len(kinds)]
    for key in ("excludes 0 (not on the failures' side)", "printed beside a bound"):
        found = {k: v for k, v in results.items() if k.startswith("issue 40 setting, first") and key in k}
        label = next(iter(found)).split(": ", 1)[1]
        tables = next(iter(found)).split(" tables")[0].rsplit(" ", 1)[1]
        shown.append(f"| {label} ({tables} tables) | " + " | ".join(
            f"{v[0]:.0f} | {v[1]:.0f}" for k in kinds for name, v in found.items() if f"report, {k}:" in name) + " |")
    return ["\n".join(t) for t in (counts, error, skewed, shown)] + metrics_tables(results)
