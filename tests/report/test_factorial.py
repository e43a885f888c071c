"""Like compared with like: rows within strata, a two-factor design's effects and interaction, a ladder's trends.

Sweep directories with known values, checked against hand computations (numpy, scipy.stats); simulated designs
where the truth is known, checked for what the intervals claim (every contrast of the family covers together).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.report import build_report, format_markdown, format_terminal, write_report
from ablate.stats.factorial import INTERACTION, MAIN, SIMPLE, TREND, WITHIN, Factor, Factorial
from ablate.stats.design import Design, Margin
from ablate.stats.judge import judge_paired
from tests.stats.conftest import mc_se

WARMUP = "train.schedule_args.warmup"
FACTORS = [{"name": "row", "levels": ["post", "pre"]}, {"name": WARMUP, "levels": [100, 0]}]
SEEDS = [0, 1, 2, 3, 4, 5]


def cell_name(row: str, warmup: int) -> str:
    return f"{row}, warmup={warmup}"


def make(root: Path, values: dict[tuple, list[float]], factors: list[dict], *, design: Design | None = None) -> Path:
    """A sweep directory: each cell (a tuple of levels, one per factor) with its final val/loss by seed."""
    runs = []
    names = [f["name"] for f in factors]
    for levels, seeds in values.items():
        variant = ", ".join(str(level) if name in ("row", "ladder") else f"{name.rsplit('.', 1)[-1]}={level}"
                            for name, level in zip(names, levels))
        for seed, value in zip(SEEDS, seeds):
            rid = f"{variant}-{seed}".replace(", ", "_")
            runs.append({"id": rid, "variant": variant, "seed": seed, "varied": {}, "run_dir": f"runs/{rid}",
                         "factors": dict(zip(names, levels)), "parameters": PARAMS.get(levels[-1], 1000)})
            (root / "runs" / rid).mkdir(parents=True)
            result = {"status": "failed", "error": "boom"} if value is None else \
                {"status": "finished", "final": {"val/loss": value}}
            (root / "runs" / rid / "result.json").write_text(json.dumps(result))
    plan = {"name": "f", "metric": {"name": "val/loss", "goal": "minimize"}, "base_variant": runs[0]["variant"],
            "factors": factors, "runs": runs, "design": (design or Design()).to_json()}
    (root / "plan.json").write_text(json.dumps(plan))
    return root


def two_by_two(effects: dict[tuple[str, int], float], noise: float = 0.02, seed: int = 0) -> dict[tuple, list[float]]:
    """Cell means + a seed effect shared by every cell + independent noise."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, 0.3, len(SEEDS))
    return {cell: list(3.0 + mean + shared + rng.normal(0, noise, len(SEEDS))) for cell, mean in effects.items()}


def row(report, name):
    return next(r for r in report.variants if r.name == name)


def effect(report, label):
    return next(e for e in report.effects if e.contrast.label == label)


def paired_interval(d: np.ndarray, level: float) -> tuple[float, float]:
    """The t interval of the mean of per-seed contrasts, from scipy."""
    lo, hi = stats.t.interval(level, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    return lo, hi


XIONG = {("post", 100): 0.0, ("pre", 100): -0.8, ("post", 0): 2.8, ("pre", 0): -0.8}


def test_rows_are_compared_with_the_base_row_at_the_same_values_of_the_other_factor(tmp_path):
    values = two_by_two(XIONG)
    report = build_report(make(tmp_path, values, FACTORS))
    assert report.strata == ["warmup=100", "warmup=0"] and report.design.rows == 7  # 2 rows, 2 mains, 2 simple, 1 x
    level = 1 - 0.05 / 7
    for warmup in (100, 0):
        pre = row(report, cell_name("pre", warmup))
        assert pre.base_name == cell_name("post", warmup) and pre.stratum == f"warmup={warmup}"
        d = np.array(values[("pre", warmup)]) - np.array(values[("post", warmup)])
        assert pre.comparison.diff == pytest.approx(d.mean())
        assert pre.comparison.interval == pytest.approx(paired_interval(d, level))
        assert row(report, cell_name("post", warmup)).is_base
    text = format_terminal(report)
    assert text.index("[warmup=100]") < text.index("pre, warmup=100") < text.index("[warmup=0]") < \
        text.index("pre, warmup=0")
    assert "### warmup=0" in format_markdown(report)


def test_main_effects_simple_effects_and_the_interaction_against_hand_computations(tmp_path):
    values = two_by_two(XIONG)
    report = build_report(make(tmp_path, values, FACTORS))
    y = {cell: np.array(v) for cell, v in values.items()}
    level = 1 - 0.05 / 7
    expected = {
        "pre, averaged over warmup": ((y["pre", 100] + y["pre", 0]) - (y["post", 100] + y["post", 0])) / 2,
        "warmup=0, averaged over the rows": ((y["post", 0] + y["pre", 0]) - (y["post", 100] + y["pre", 100])) / 2,
        "warmup=0 at post": y["post", 0] - y["post", 100],
        "warmup=0 at pre": y["pre", 0] - y["pre", 100],
        "pre x warmup=0": (y["pre", 0] - y["post", 0]) - (y["pre", 100] - y["post", 100]),
    }
    for label, d in expected.items():
        c = effect(report, label).comparison
        assert c.diff == pytest.approx(d.mean()), label
        assert c.interval == pytest.approx(paired_interval(d, level)), label
    assert effect(report, "pre x warmup=0").comparison.verdict == "better"  # -3.6: removing warmup hurts post only
    assert effect(report, "warmup=0 at post").comparison.verdict == "worse"
    (finding,) = [line for line in format_markdown(report).splitlines() if line.startswith("warmup=0: ")]
    assert "at post" in finding and "at pre" in finding and "its effect depends on it" in finding
    paths = write_report(report, tmp_path / "out")
    lines = paths["effects.csv"].read_text().splitlines()
    assert lines[0].startswith("effect,kind,delta") and len(lines) == 1 + 5


def test_a_pure_interaction_has_no_main_effect(tmp_path):
    """Cells +g, -g, -g, +g: each factor's effect averages to 0, the interaction is 4g."""
    g = 0.5
    means = {("post", 100): g, ("pre", 100): -g, ("post", 0): -g, ("pre", 0): g}
    values = two_by_two(means, noise=0.01)
    report = build_report(make(tmp_path, values, FACTORS, design=Design(margin=Margin(0.1))))
    assert effect(report, "pre x warmup=0").comparison.diff == pytest.approx(4 * g, abs=0.05)
    assert effect(report, "pre x warmup=0").comparison.verdict == "worse"
    for label in ("pre, averaged over warmup", "warmup=0, averaged over the rows"):
        c = effect(report, label).comparison
        assert abs(c.diff) < 0.05 and c.verdict == "equivalent", label
    assert row(report, "pre, warmup=100").comparison.verdict == "better"
    assert row(report, "pre, warmup=0").comparison.verdict == "worse"


def test_a_stratum_without_its_base_row_is_named_not_compared(tmp_path):
    values = two_by_two(XIONG)
    del values[("post", 0)]
    report = build_report(make(tmp_path, values, FACTORS))
    assert row(report, "pre, warmup=0").comparison is None and row(report, "pre, warmup=100").comparison
    assert report.missing == ("warmup=0",) and report.effects == ()  # no complete 2x2: no effects
    assert report.design.rows == 1
    for text in (format_terminal(report), format_markdown(report)):
        assert "not compared: no base row at warmup=0" in text


PARAMS = {"S": 1e5, "M": 4e5, "L": 1.6e6}
LADDER = [{"name": "row", "levels": ["base", "rope"]}, {"name": "ladder", "levels": ["S", "M", "L"]}]


def ladder(deltas: list[float], noise: float = 0.01) -> dict[tuple, list[float]]:
    rng = np.random.default_rng(1)
    values = {}
    for step, d in zip("SML", deltas):
        shared = 4.0 - 0.3 * "SML".index(step) + rng.normal(0, 0.2, len(SEEDS))
        values[("base", step)] = list(shared + rng.normal(0, noise, len(SEEDS)))
        values[("rope", step)] = list(shared + d + rng.normal(0, noise, len(SEEDS)))
    return values


@pytest.mark.parametrize("deltas,verdict", [([-0.2, -0.2, -0.2], "consistent: better at every size"),
                                            ([-0.1, -0.3, -0.5], "grows"),
                                            ([-0.5, -0.3, -0.1], "shrinks"),
                                            ([-0.3, 0.0, 0.3], "flips sign")])
def test_the_trend_verdict_on_synthetic_ladders(tmp_path, deltas, verdict):
    report = build_report(make(tmp_path, ladder(deltas), LADDER))
    (trend,) = report.trends
    assert trend.verdict == verdict
    assert [size for _, size, _ in trend.steps] == [1e5, 4e5, 1.6e6]
    # the slope per doubling, from numpy's least squares over the per-seed differences
    z = np.log2([1e5, 4e5, 1.6e6])
    values = ladder(deltas)
    d = np.array([np.array(values["rope", s]) - np.array(values["base", s]) for s in "SML"])  # (steps, seeds)
    slopes = np.polyfit(z, d, 1)[0]
    assert trend.slope.diff == pytest.approx(slopes.mean())
    assert trend.slope.interval == pytest.approx(paired_interval(slopes, 1 - 0.05 / report.design.rows))
    assert "across sizes" in format_terminal(report) and "## Across sizes" in format_markdown(report)
    assert "trends.svg" in write_report(report, tmp_path / "out")


def _simulated_family(factorial: Factorial, truth: dict[str, float], rng: np.random.Generator, sims: int,
                      seeds: int) -> float:
    """How often every contrast's interval covers its true value together, in ``sims`` simulated sweeps of cells with
    means ``truth``, a shared seed effect and noise."""
    family = factorial.family()
    design = Design(rows=len(family))
    shared = rng.normal(0, 1.0, (sims, seeds))
    y = {cell: mean + shared + rng.normal(0, 0.5, (sims, seeds)) for cell, mean in truth.items()}
    covered = np.ones(sims, bool)
    for c in family:
        w = c.weights()
        true = sum(w[v] * truth[v] for v in w)  # the contrast of the cell means: what the interval is about
        x = sum(wt * y[v] for v, wt in c.plus)
        base = sum(wt * y[v] for v, wt in c.minus)
        j = judge_paired(x, base, design, "minimize")
        covered &= (j.lo <= true) & (true <= j.hi)
    return float(covered.mean())


@pytest.mark.parametrize("seeds", [3, 5])
def test_every_contrast_of_a_two_by_two_covers_together(seeds):
    cells = {cell_name(r, w): {"row": r, WARMUP: w} for r in ("post", "pre") for w in (100, 0)}
    factorial = Factorial([Factor("row", ("post", "pre")), Factor(WARMUP, (100, 0))], cells, "post, warmup=100")
    kinds = sorted(c.kind for c in factorial.family())
    assert kinds == sorted([SIMPLE, SIMPLE, MAIN, MAIN, WITHIN, WITHIN, INTERACTION])
    truth = {cell_name(r, w): XIONG[(r, w)] for r in ("post", "pre") for w in (100, 0)}
    rate = _simulated_family(factorial, truth, np.random.default_rng(seeds), 20_000, seeds)
    assert rate >= 0.95 - 3 * mc_se(0.95)


def test_every_contrast_of_a_ladder_covers_together():
    cells = {f"{r}, {s}": {"row": r, "ladder": s} for r in ("base", "rope", "alibi") for s in "SML"}
    factorial = Factorial([Factor("row", ("base", "rope", "alibi")), Factor("ladder", ("S", "M", "L"))], cells,
                          "base, S", parameters={f"base, {s}": PARAMS[s] for s in "SML"})
    assert sorted(c.kind for c in factorial.family()) == [SIMPLE] * 6 + [TREND] * 2
    truth = {f"{r}, {s}": {"base": 0.0, "rope": -0.1 * i, "alibi": 0.2}[r] for r in ("base", "rope", "alibi")
             for i, s in enumerate("SML")}
    rate = _simulated_family(factorial, truth, np.random.default_rng(7), 20_000, 4)
    assert rate >= 0.95 - 3 * mc_se(0.95)
