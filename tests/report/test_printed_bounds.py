"""The numbers beside a verdict say what the interval proves: *undecided (|Δ| < x)* prints an x no smaller than the
farthest end of the interval (rounded up at its last digit, never to the nearest), and a Δ beside *better* or *worse*
is never ``+0.000``: it keeps its side of 0 and of the margin as the interval's bounds do. Random intervals at several
scales, through the cells every format prints (terminal, Markdown, HTML read the same cells)."""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal

import numpy as np
import pytest

from ablate.report import bounds, build_report, format_markdown, format_terminal
from ablate.report.cells import FORMATS, NUMBER, verdict_text
from ablate.report.columns import displayed
from ablate.report.effects import delta_cell
from ablate.stats import verdict as V
from ablate.stats.design import Design, Margin
from tests.report.test_verdicts import make

SPECS = sorted({*FORMATS.values(), NUMBER, ".3g"})
SCALES = (1e-4, 1.0, 1e3)
X = re.compile(r"\(\|Δ\| < (\S+)\)")


def _unit(text: str) -> Decimal:
    """One unit of the last digit printed: ``0.000338`` -> 1e-6, ``1.24e+04`` -> 100, ``2`` -> 1."""
    return Decimal(1).scaleb(Decimal(text.lstrip("+")).as_tuple().exponent)


def _check_x(printed: str, lo: float, hi: float) -> None:
    x = max(abs(lo), abs(hi))
    assert float(printed) >= x, (lo, hi, printed)  # the interval allows no |Δ| beyond what is printed
    assert Decimal(printed) - Decimal(repr(x)) < _unit(printed), (lo, hi, printed)  # and no looser than its digits


def test_the_issue_s_interval_prints_an_x_its_upper_end_does_not_exceed():
    """[-0.000126, +0.0003375], its upper end 0.00033748 to more digits: x was printed 0.000337, below it."""
    assert bounds.at_least(0.00033748, ".3g") == "0.000338"
    assert bounds.bound(0.00033748, ".3g") == "0.000337"  # a bound of the interval itself rounds to the nearest
    assert bounds.at_least(0.5, ".3g") == "0.5" and bounds.at_least(999.51, ".3g") == "1e+03"  # exact; up a decade


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("scale", SCALES)
def test_undecided_x_is_never_below_the_interval_s_farthest_end(spec, scale):
    rng = np.random.default_rng(int(scale * 1e4) + len(spec))
    for _ in range(4_000):
        lo, hi = -scale * rng.uniform(0, 10), scale * rng.uniform(0, 10)
        margin = rng.choice([None, 0.5 * scale, 0.01 * scale])
        if margin is not None and max(-lo, hi) <= margin:
            continue  # inside the margin: equivalent, not undecided
        _check_x(bounds.at_least(max(-lo, hi), spec, bounds.lines(margin)), lo, hi)


def _report(tmp_path, margin: float | None):
    values = {"base": [(s, 2.0 + 0.1 * s) for s in range(3)]}
    values.update({f"r{i:02d}": [(s, 2.0 + 0.1 * s + 0.01 * i + 0.003 * s * s) for s in range(3)] for i in range(12)})
    design = Design(margin=Margin(margin)) if margin else None
    return build_report(make(tmp_path, values, design=design))


def _with(report, rng, interval, margin):
    """``report`` with each row's comparison replaced by ``interval(rng)`` and the verdict it reads."""
    rows = []
    for row in report.variants:
        if row.is_base:
            rows.append(row)
            continue
        lo, hi = interval(rng)
        code = int(V.from_interval(lo, hi, report.goal, margin))
        c = replace(row.comparison, interval=(lo, hi), verdict=V.name(code), margin=margin, diff=(lo + hi) / 2,
                    detail=V.qualifier(code, lo, hi, report.goal), failed=(0, 3, 0, 3), reason="", on_failures=False)
        rows.append(replace(row, comparison=c, delta=c.diff))
    return replace(report, variants=tuple(rows))


@pytest.mark.parametrize("scale", SCALES)
def test_every_format_prints_undecided_x_rounded_up(tmp_path, scale):
    report = _report(tmp_path, None)
    rng = np.random.default_rng(int(scale * 1e4))
    for trial in range(30):
        def undecided(rng):
            return -scale * rng.uniform(0, 10), scale * rng.uniform(0, 10)

        wild = _with(report, rng, undecided, None)
        terminal, markdown = format_terminal(wild, wide=True, width=400), format_markdown(wild)
        for row in (r for r in wild.variants if not r.is_base):
            text = verdict_text(wild, row)
            (printed,) = X.findall(text)
            _check_x(printed, *row.comparison.interval)
            for name, page in (("terminal", terminal), ("markdown", markdown)):
                line = next(x for x in page.splitlines() if re.search(rf"(^|\W){row.name}\W", x) and "[" in x)
                assert f"Δ\\| < {printed})" in line.replace("Δ|", "Δ\\|"), (name, line)  # Markdown escapes |


def _delta_cells(report) -> dict[str, str]:
    delta = next(c for c in displayed(report) if c.csv == (f"{report.metric}_delta",))
    return {row.name: delta.cell(row) for row in report.variants if not row.is_base}


@pytest.mark.parametrize("margin", [None, 0.06])
def test_a_delta_beside_better_or_worse_keeps_its_sign(tmp_path, margin):
    """Intervals that exclude 0 by a hair, either way, at several scales: Δ printed with the column's digits would
    be ``+0.000`` or ``-0.000`` beside *worse* or *better* (with a margin: *equivalent (worse, by less than the
    margin)*); it gets the digits that keep its sign, and its side of ±the margin, as the bounds beside it do."""
    report = _report(tmp_path, margin)
    rng = np.random.default_rng(5)
    spec = FORMATS[report.metric]

    def near_zero(rng):
        side, scale = rng.choice([-1, 1]), 10.0 ** rng.uniform(-7, -2)
        lo, hi = sorted(side * scale * np.sort(rng.uniform(0.01, 1, 2)))
        return float(lo), float(hi)

    seen = set()
    for _ in range(40):
        wild = _with(report, rng, near_zero, margin)
        cells, terminal = _delta_cells(wild), format_terminal(wild, width=200)
        for row in (r for r in wild.variants if not r.is_base):
            c, printed = row.comparison, cells[row.name]
            assert re.search(r"better|worse", c.statement), c  # better, worse; or equivalent (worse, by less ...)
            seen.add(c.statement.split(",")[0])
            assert float(printed) != 0 and np.sign(float(printed)) == np.sign(c.diff), (c.diff, printed)
            assert all((float(printed) > line) == (c.diff > line) for line in bounds.lines(margin))
            assert printed == delta_cell(c, spec)  # the effects' Δ prints by the same rule
            line = next(x for x in terminal.splitlines() if x.startswith(row.name + " "))
            assert f" {printed} " in line and "0.000 " not in line.replace(printed, ""), line
    assert seen == ({"better", "worse"} if margin is None else
                    {"equivalent (better", "equivalent (worse"})


@pytest.mark.parametrize("spec", SPECS)
def test_random_deltas_print_on_their_side_of_0_and_the_margin(spec):
    rng = np.random.default_rng(len(spec))
    for scale in SCALES:
        values = rng.choice([-1, 1], 3_000) * scale * 10.0 ** rng.uniform(-6, 1, 3_000)
        for value, margin in zip(values, rng.choice([0.0, 0.06 * scale, 0.5 * scale], 3_000)):
            printed = bounds.signed(float(value), spec, margin or None)
            assert printed[0] in "+-" and all((float(printed) > line) == (value > line) and
                                              (float(printed) < line) == (value < line)
                                              for line in bounds.lines(margin or None)), (value, margin, printed)
