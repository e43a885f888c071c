"""Which verdicts are false for a known true Δ: what the simulations count as errors."""

from __future__ import annotations

import numpy as np

from ablate.stats import verdict as V


def false_claims(codes: np.ndarray, delta: float, goal: str, margin: float | None) -> np.ndarray:
    """True where a verdict states something the true Δ contradicts (better when it is not, equivalent when
    |Δ| is not below the margin, ...); undecided, untested and cannot-test claim nothing."""
    gain = -delta if goal == "minimize" else delta
    m = np.inf if margin is None else margin
    true = {V.BETTER: gain > 0, V.WORSE: gain < 0, V.EQUIVALENT: abs(gain) < m, V.NOT_WORSE: gain > -m,
            V.NOT_BETTER: gain < m}
    wrong = [code for code, holds in true.items() if not holds]
    return np.isin(codes, wrong)
