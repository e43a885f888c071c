"""Section ``metrics`` of ``verdicts.py``: every row judged on two metrics (val loss and BLEU), the family of rows x
metrics (Bonferroni), its error at three correlations of the two metrics' per-seed differences, fixed and sequential
(the joint stopping rule replayed look by look), beside the naive rule (each metric at 0.05 / rows); the seeds the
joint rule costs, the power per row, and speculative seeds. The simulation is ``tests/stats/several.py``'s, the one
tests/stats/test_several_metrics.py checks; this prints its rates at 20,000 sweeps a cell."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.stats import several as S  # noqa: E402  (the tests' simulation: one owner)

SEQ = "sequential 3→10"
# Each figure's key in verdicts.json, by what it measures and the correlation rho (the documents' tables read these)
KEYS = {"null": "2 metrics, 3 null rows, ρ = {rho}: some verdict false, fixed 10 | sequential 3→10",
        "margin": "2 metrics, rows at 0 / +m / −m with margins, ρ = {rho}: some statement false, fixed 10 | "
                  "sequential 3→10",
        "naive": "each metric at 0.05 / 3 rows (not shared), 3 null rows, ρ = {rho}: some verdict false, fixed 10 | "
                 "sequential 3→10",
        "seeds": "2 metrics, rows at 0 / +m / −m with margins, ρ = {rho}: mean seeds per row, sequential, joint rule | "
                 "val loss alone (3 rows)"}
SPECULATIVE = ("2 metrics, rows at 0 / +m / −m, ρ = 0.5, sequential: readings whose verdict, Δ or interval differ with "
               "1-2 speculative seeds per row | readings | rows with a speculative seed")
POWER_RHO = 0.5
# (label, true improvement in sds on (loss, BLEU), the metrics judged, which is counted)
POWER = (("val loss alone (3 rows), Δ = 1 sd: loss called better", (1.0, 0.0), (S.LOSS,), S.LOSS.name),
         ("2 metrics (3 rows x 2), Δ = 1 sd on loss, BLEU null: loss called better", (1.0, 0.0), S.METRICS,
          S.LOSS.name),
         ("2 metrics (3 rows x 2), Δ = 1 sd on both: loss called better", (1.0, 1.0), S.METRICS, S.LOSS.name),
         ("2 metrics (3 rows x 2), Δ = 1 sd on both: BLEU called better", (1.0, 1.0), S.METRICS, S.BLEU.name),
         ("2 metrics (3 rows x 2), Δ = 1 sd on both: both called better", (1.0, 1.0), S.METRICS, "both"))


def power_key(label: str) -> str:
    return f"power per row, ρ = {POWER_RHO}, {label}: fixed 10 | sequential 3→10 | mean seeds, sequential"


def several_metrics(rng, sims: int) -> list[list]:
    """The section's rows: ``[label, measured, stated, second | third]`` as verdicts.py prints and records them."""
    out = []
    two, naive = S.designs(), S.designs(metrics=1)
    for rho in S.RHOS:
        rates = {}
        for kind, deltas, designs, margins in (("null", S.NULL, two, False), ("margin", S.AT_MARGIN, two, True),
                                               ("naive", S.NULL, naive, False)):
            rates[kind] = [S.family(rng, sims, rho, deltas, d, margins=margins)[:2] for d in designs.values()]
        for kind, stated in (("null", "≤ 0.05"), ("margin", "≤ 0.05"), ("naive", "(not controlled)")):
            (fixed, _), (seq, _) = rates[kind]
            out.append([KEYS[kind].format(rho=rho), fixed, stated, f"{seq:.4f}"])
        _, alone, _ = S.family(rng, sims, rho, S.AT_MARGIN, naive[SEQ], metrics=(S.LOSS,))
        out.append([KEYS["seeds"].format(rho=rho), rates["margin"][1][1], "", f"{alone:.2f}"])
    differ, readings, spared = S.speculative(rng, sims, 0.5)
    out.append([SPECULATIVE, differ, "never", f"{readings} | {spared}"])
    for label, delta, metrics, counted in POWER:
        found = [S.power(rng, sims, POWER_RHO, delta, d, metrics)
                 for d in S.designs(metrics=len(metrics)).values()]
        out.append([power_key(label), found[0][counted], "", f"{found[1][counted]:.3f} | {found[1]['seeds']:.2f}"])
    return out
