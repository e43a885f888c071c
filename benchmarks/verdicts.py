"""What the report's verdicts mean, measured: simulated sweeps where the truth is known, run through ``ablate.stats``
(the code that writes the report and that the sequential queue follows). The assertions live in tests/stats; this
prints the rates themselves, for the README.

- coverage: all R intervals of a table cover their true Δ together (stated: 95%), paired and unpaired;
- disagreement: a row whose interval excludes 0 without a better/worse verdict, or the reverse (stated: never);
- equivalence at the margin: a true Δ exactly at the margin called equivalent (stated: at most 5% / R);
- sequential: some verdict of the table false, rows stopped at their first decision (stated: at most 5%); the old
  rule (look again after each added seed) for comparison; power and seeds used against a fixed 10-seed design;
- failures: every run diverges with probability 0.2 (stated: at most 5% false verdicts); a row whose bad seeds fail.
- noise shapes: heavy-tailed (t with 3 degrees of freedom) and skewed (lognormal rows against a normal base, equal
  means) per-seed noise, 3 null rows: some verdict false, each interval covering; how often the skew flag fires.
- stopped runs: one hyperband band (eta 2) stops the worse half of the runs at the first validation; a row with no
  effect but noisier than the base, and a row truly worse: how often each is called *better*, by the report
  (compared at the last step every run reached) and by the rule before it (the survivors' final values).
- failures and a margin (issue 40, ``_verdict_rules.py``): the issue's 400 tables counted row by row, and the family's
  error, under the failure guard before and after it (which kept only the statements the failures cannot overturn),
  with bounds printed as before (``+.3f``) and after (``ablate.report.bounds``); the first 40 of those tables
  written as sweep folders and read back from every format of ``ablate report`` (terminal, Markdown, HTML, CSV).
- skew rules: lognormal rows against a normal base at 3 to 80 seeds, error and power of the t interval at the row's
  level (the rule), at half the level on a row flagged skewed, and at half the level on every row.
- several metrics (``_verdict_metrics.py``): every row judged on val loss and BLEU, their per-seed differences
  correlated 0, 0.5 and 0.9: some verdict of rows x metrics false (stated: at most 5%), fixed and sequential (the joint
  rule: a row gets a seed more while any metric is undecided), beside each metric at 0.05 / rows (not shared); the
  seeds the joint rule costs; power per row against the single-metric design; speculative seeds beyond a row's stop
  look (stated: they change nothing).

    python benchmarks/verdicts.py [--quick] [--only NAMES] [--record]

--quick: 4,000 sweeps per cell instead of 20,000 (10 tables through the report); --only: some sections
(coverage,equivalence,sequential,failures,shapes,stopped,margins,formats,skew,metrics); --record: write every result to
benchmarks/verdicts.json, the file the documents' figures are checked against (tests/stats/test_documented.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import _common as C
import _verdict_docs as docs
import _verdict_metrics as several
import _verdict_rules as rules
from ablate.stats import skew
from ablate.stats import verdict as V
from ablate.stats.design import Design, Margin
from ablate.stats.judge import judge_paired, judge_unpaired


def sides(rng, sims, n, deltas, rho=0.8):
    """The base (sims, n) and one row per Δ, seeds correlated ``rho`` between sides (same seed, same data order)."""
    seed = rng.normal(0, np.sqrt(rho), (sims, n))
    base = seed + rng.normal(0, np.sqrt(1 - rho), (sims, n))
    return base, [seed + d + rng.normal(0, np.sqrt(1 - rho), (sims, n)) for d in deltas]


def decided(j, codes=(V.BETTER, V.WORSE)):
    return np.isin(j.verdict, codes)


def coverage(rng, sims):
    deltas, rows = [0.0, 0.0, 0.0, 0.5, -1.0], []
    design = Design(rows=5)
    for n in (2, 3, 5, 10):
        for paired in (True, False):
            if paired:
                base, xs = sides(rng, sims, n, deltas)
            else:
                base = rng.normal(0, 1, (sims, n + 1))
                xs = [rng.normal(d, 4.0, (sims, n)) for d in deltas]
            cover, disagree = np.ones(sims, bool), np.zeros(sims, bool)
            for d, x in zip(deltas, xs):
                j = (judge_paired if paired else judge_unpaired)(x, base, design, "minimize")
                cover &= (j.lo <= d) & (d <= j.hi)
                disagree |= ((j.lo > 0) | (j.hi < 0)) != decided(j)
            rows.append([f"coverage, 5 rows, n={n}, {'paired' if paired else 'unpaired (sd 4 vs 1)'}",
                         cover.mean(), "≥ 0.95", disagree.mean()])
    return rows


def equivalence(rng, sims):
    rows = []
    for n in (3, 5, 10):
        base, (x,) = sides(rng, sims, n, [0.5], rho=0.5)
        j = judge_paired(x, base, Design(rows=2, margin=Margin(0.5)), "minimize")
        rows.append([f"equivalent when Δ = margin, 2 rows, n={n}", np.mean(j.verdict == V.EQUIVALENT), "≤ 0.025", ""])
    return rows


def sequential(rng, sims):
    design, rows = Design(rows=3, first=(0, 1, 2), max_seeds=10), []
    base, xs = sides(rng, sims, 10, [0.0, 0.0, 0.0])
    wrong = np.zeros(sims, bool)
    for x in xs:
        wrong |= decided(judge_paired(x, base, design, "minimize"))
    rows.append(["sequential 3→10 seeds, 3 null rows: some verdict false", wrong.mean(), "≤ 0.05", ""])
    naive = np.zeros(sims, bool)
    for x in xs:
        for n in range(3, 11):
            naive |= decided(judge_paired(x[:, :n], base[:, :n], Design(rows=3), "minimize"))
    rows.append(["old rule: fixed test after each added seed, 3→10", naive.mean(), "(not controlled)", ""])
    sd = np.sqrt(2 * 0.2)
    for effect in (1.0, 1.5, 2.0, 5.0):
        base, (x,) = sides(rng, sims, 10, [effect * sd])
        fixed = judge_paired(x, base, Design(rows=3), "minimize")
        seq = judge_paired(x, base, design, "minimize")
        rows.append([f"power at Δ = {effect} sd: fixed 10 seeds | sequential (mean seeds)",
                     np.mean(fixed.verdict == V.WORSE), f"{np.mean(seq.verdict == V.WORSE):.3f}",
                     f"{seq.look.mean():.2f}"])
    return rows


def failures(rng, sims):
    rows = []
    for label, design in (("fixed 10", Design(rows=3)), ("sequential 3→10", Design(rows=3, first=(0, 1, 2),
                                                                                      max_seeds=10))):
        base, xs = sides(rng, sims, 10, [0.0, 0.0, 0.0])
        fail = lambda v: np.where(rng.random(v.shape) < 0.2, np.nan, v)  # noqa: E731
        base = fail(base)
        wrong = np.zeros(sims, bool)
        for x in xs:
            wrong |= decided(judge_paired(fail(x), base, design, "minimize"))
        rows.append([f"20% of runs diverge, 3 null rows, {label}: some verdict false", wrong.mean(), "≤ 0.05", ""])
    base, (x,) = sides(rng, sims, 10, [0.0])
    x = np.where((x > base) & (rng.random(x.shape) < 0.5), np.nan, x)
    j = judge_paired(x, base, Design(rows=1), "minimize")
    rows.append(["the row's worse seeds fail half the time: called better", np.mean(j.verdict == V.BETTER),
                 "≤ 0.05", ""])
    return rows


def shapes(rng, sims):
    """Three null rows, paired, with per-seed noise that is not normal."""
    mean_lognormal = np.exp(0.5)
    draws = {"t(3) noise, both sides": (lambda size: rng.standard_t(3, size), lambda size: rng.standard_t(3, size)),
             "lognormal rows, normal base": (lambda size: rng.lognormal(0, 1, size) - mean_lognormal,
                                             lambda size: rng.normal(0, 1, size))}
    rows = []
    for label, (row_draw, base_draw) in draws.items():
        for n in (3, 5, 10):
            base = base_draw((sims, n))
            wrong, cover, flagged = np.zeros(sims, bool), np.ones(sims, bool), np.zeros(sims, bool)
            for _ in range(3):
                x = row_draw((sims, n))
                j = judge_paired(x, base, Design(rows=3), "minimize")
                wrong |= decided(j)
                cover &= (j.lo <= 0) & (0 <= j.hi)
                flagged |= np.abs(skew.skewness(x - base)) > skew.threshold(n)
            if label.startswith("lognormal"):  # its error is the skew section's, beside the stricter rules
                rows.append([f"{label}, 3 null rows, n={n}: all three intervals cover", cover.mean(), "≥ 0.95", ""])
            else:
                rows.append([f"{label}, 3 null rows, n={n}: some verdict false | all cover", wrong.mean(), "≤ 0.05",
                             f"{cover.mean():.3f}"])
            rows.append([f"{label}, n={n}: some row flagged skewed", flagged.mean(), "", ""])
    return rows


def stopped(rng, sims):
    """Runs stopped early by hyperband (tests/stats/stopped.py: the scenarios, through the report's own code)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.stats.stopped import SCENARIOS, rates

    rows = []
    for scenario in SCENARIOS:
        measured = rates(rng, scenario, sims // 5)
        rows.append([f"hyperband, {scenario}: called better (report)", measured["better"], "≤ 0.05", ""])
        rows.append([f"hyperband, {scenario}: called better (survivors only)", measured["better, survivors only"],
                     "(not controlled)", ""])
    return rows


def margins(rng, sims):
    return rules.issue_counts() + rules.family_error(rng, sims)


def through_report(rng, sims):
    return rules.formats(tables=rules.FORMAT_TABLES if sims >= 20_000 else 10)


def skewed(rng, sims):
    return rules.skew_rules(rng, sims)


SECTIONS = {"coverage": coverage, "equivalence": equivalence, "sequential": sequential, "failures": failures,
            "shapes": shapes, "stopped": stopped, "margins": margins, "formats": through_report, "skew": skewed,
            "metrics": several.several_metrics}
RECORD = Path(__file__).resolve().parent / "verdicts.json"


def _values(row: list) -> float | list[float]:
    """A row's figures for the record: the measured one, the stated column's where it is a figure (the sequential
    design's power), then the last column's ("0.186 | 0.063": two)."""
    stated = [float(row[2])] if str(row[2]).replace(".", "", 1).isdigit() else []
    extra = stated + [float(x) for x in str(row[3]).split("|") if x.strip()]
    return [float(row[1]), *extra] if extra else float(row[1])


def main() -> None:
    args = C.parse_args(__doc__, lambda p: (p.add_argument("--only", default=",".join(SECTIONS)),
                                            p.add_argument("--record", action="store_true")))
    only = args.only.split(",")
    if args.record and (args.quick or set(only) != set(SECTIONS)):
        raise SystemExit("verdicts.py: --record writes every section at 20,000 sweeps: drop --quick and --only")
    sims = 4000 if args.quick else 20_000
    settings = {"sweeps per cell": sims, "alpha": 0.05, "seed correlation between sides": 0.8}
    info = C.print_header("verdicts: what the report's numbers mean, by simulation", settings)
    rows = []
    for name in only:  # each section from its own seed: one section's figures do not depend on which others ran
        rows += SECTIONS[name](np.random.default_rng([2026, list(SECTIONS).index(name)]), sims)
    print(C.table(["check", "measured", "stated", "second | seeds"], rows))
    results = {r[0]: _values(r) for r in rows}
    C.emit("verdicts", info, settings, results)
    if args.record:
        RECORD.write_text(json.dumps({"machine": info, "settings": settings, "results": C._finite(results)},
                                     indent=1, ensure_ascii=False) + "\n")
        print("\n".join(docs.readme_rows(results)), *docs.verdicts_tables(results), sep="\n\n")  # the documents'


if __name__ == "__main__":
    main()
