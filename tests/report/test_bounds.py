"""A printed bound is on the same side of 0 and of the margin as the bound: never ``+0.000`` beside *worse* for a
lower bound of +0.00003, never ``+0.060`` beside *equivalent* at a margin of 0.06; in every format (terminal, Markdown,
HTML, the CSV files), for random intervals."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace

import numpy as np
import pytest

from ablate.report import bounds, build_report, format_markdown, format_terminal
from ablate.report.html import render_html
from ablate.report.records import table_columns, table_records, to_csv
from ablate.report.text import FORMATS, NUMBER
from ablate.stats import verdict as V
from ablate.stats.design import Design, Margin
from tests.report.test_verdicts import make

SPECS = sorted({*FORMATS.values(), NUMBER, ".3g"})
MARGIN = 0.06


def _side(x: float, line: float) -> int:
    return int(x > line) - int(x < line)


@pytest.mark.parametrize("value, spec, margin, printed", [
    (3.2e-05, ".3f", None, "+0.00003"),  # the lower bound beside *worse*: not +0.000
    (-0.0004, ".3f", None, "-0.0004"),  # not -0.000
    (0.07, ".3f", None, "+0.070"),  # nothing to add
    (0.0598, ".3f", MARGIN, "+0.0598"),  # inside the margin: not +0.060
    (-0.06004, ".3f", MARGIN, "-0.06004"),  # just beyond it
    (0.0, ".3f", None, "+0.000"),  # exactly 0 is 0
    (1.2e-07, ".4g", None, "+1.2e-07"),  # significant digits keep the sign already
])
def test_a_bound_keeps_its_side_of_zero_and_the_margin(value, spec, margin, printed):
    assert bounds.bound(value, "+" + spec, bounds.lines(margin)) == printed


@pytest.mark.parametrize("spec", SPECS)
def test_random_bounds_print_on_their_side_with_the_columns_digits_where_those_suffice(spec):
    rng = np.random.default_rng(38)
    scale = 10.0 ** rng.uniform(-7, 1, 20_000)
    values = rng.choice([-1, 1], 20_000) * scale
    margins = np.where(rng.random(20_000) < 0.3, None, rng.choice([MARGIN, 0.005, 0.5], 20_000))
    values = np.where(rng.random(20_000) < 0.2, np.array([m or 0.0 for m in margins]) + values * 1e-3, values)
    for value, margin in zip(values, margins):
        text = bounds.bound(float(value), "+" + spec, bounds.lines(margin))
        assert text[0] in "+-" and all(_side(float(text), line) == _side(value, line)
                                       for line in bounds.lines(margin)), (value, margin, text)
        plain = format(value, "+" + spec)
        if all(_side(float(plain), line) == _side(value, line) for line in bounds.lines(margin)):
            assert text == plain  # no digit added where the column's own are enough


def _random_report(tmp_path, rng):
    """A sweep of 12 rows with a margin, each row's comparison then given a random interval near 0 or the margin and
    the verdict (and qualifier) that interval reads."""
    values = {"base": [(s, 2.0 + 0.1 * s) for s in range(3)]}
    values.update({f"r{i:02d}": [(s, 2.0 + 0.1 * s + 0.01 * i + 0.003 * s * s) for s in range(3)] for i in range(12)})
    report = build_report(make(tmp_path, values, design=Design(margin=Margin(MARGIN))))
    rows = []
    for row in report.variants:
        if row.is_base:
            rows.append(row)
            continue
        near = rng.choice([0.0, MARGIN, -MARGIN])
        lo = near + rng.choice([-1, 1]) * 10.0 ** rng.uniform(-6, -2.5)
        hi = lo + 10.0 ** rng.uniform(-4, -1)
        code = int(V.from_interval(lo, hi, report.goal, MARGIN))
        c = replace(row.comparison, interval=(lo, hi), verdict=V.name(code), margin=MARGIN, diff=(lo + hi) / 2,
                    detail=V.qualifier(code, lo, hi, report.goal), failed=(0, 3, 0, 3), reason="")
        rows.append(replace(row, comparison=c, delta=c.diff))
    return replace(report, variants=tuple(rows))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_format_prints_random_intervals_on_their_side_of_0_and_the_margin(tmp_path, seed):
    report = _random_report(tmp_path, np.random.default_rng(seed))
    spec = FORMATS[report.metric]
    texts = {"terminal": format_terminal(report), "markdown": format_markdown(report), "html": render_html(report)}
    table = list(csv.DictReader(io.StringIO(to_csv(table_columns(report), table_records(report)))))
    for row in (r for r in report.variants if not r.is_base):
        lo, hi = row.comparison.interval
        printed = bounds.interval(lo, hi, spec, MARGIN)
        a, b = (float(x) for x in re.fullmatch(r"\[(\S+), (\S+)\]", printed).groups())
        for value, shown in ((lo, a), (hi, b)):
            assert all(_side(shown, line) == _side(value, line) for line in bounds.lines(MARGIN)), (value, printed)
        for name, text in texts.items():
            line = next(x for x in text.splitlines() if re.search(rf"(^|\W){row.name}\W", x) and "[" in x)
            assert printed in line, (name, row.name, printed, line)
        written = next(r for r in table if r["variant"] == row.name)
        assert (float(written["ci_low"]), float(written["ci_high"])) == (lo, hi)  # every digit: its sign is its own
