"""A variant named in CJK, with an emoji or a combining accent does not shift the terminal table's columns: cells are
padded to the columns a terminal draws them in (two for a wide character, none for a combining mark), not to their
count of code points."""

from __future__ import annotations

import pytest

from ablate.report import build_report, format_terminal
from ablate.report.render import _aligned, display_width
from tests.report.conftest import make_verdict_sweep

NAMES = {"base": (3, 0.0), "学习率": (3, 0.1), "none🙂": (3, 1.6), "café": (3, 0.004), "ｗｉｄｅ": (3, 0.05)}
COMBINING = "cafe\u0301"  # e and a combining acute: four columns on screen, five code points


@pytest.mark.parametrize("text, width", [("abc", 3), ("学习率", 6), ("none🙂", 6), (COMBINING, 4), ("ｗｉｄｅ", 8),
                                         ("", 0), ("Δ val loss", 10)])
def test_display_width_counts_the_columns_a_terminal_draws(text, width):
    assert display_width(text) == width


def test_every_line_of_an_aligned_table_is_as_wide_as_its_header():
    headers = ["variant", "runs", "Δ"]
    rows = [[name, "3/3", "+0.100"] for name in ("base", "学习率", "none🙂", COMBINING, "ｗｉｄｅ")]
    lines = _aligned(headers, rows, left={0})
    assert len({display_width(line) for line in lines}) == 1, lines
    assert len({len(line) for line in lines}) > 1  # counted in code points, they differ: the test can fail


@pytest.mark.parametrize("wide", [False, True])
def test_a_report_with_wide_names_keeps_its_columns(tmp_path, wide):
    names = {**NAMES, COMBINING: (3, 0.02)}
    report = build_report(make_verdict_sweep(tmp_path, names))
    text = format_terminal(report, wide=wide, width=400)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("variant"))
    header, rule, rows = lines[at], lines[at + 1], lines[at + 2:at + 2 + len(names)]
    assert [row.split("  ")[0].strip() for row in rows] == list(names)

    def grid(line: str) -> str:
        """The line as the terminal lays it out: a wide character's second column a placeholder, a combining mark on
        its letter's column."""
        return "".join(ch + "\0" * (display_width(ch) - 1) for ch in line if display_width(ch))

    gaps = [i for i, ch in enumerate(grid(rule)) if ch == " "]  # between the columns: blank on every line
    assert gaps and display_width(rule) == len(grid(rule))
    for line in [header, *rows]:
        laid = grid(line)
        assert all(i >= len(laid) or laid[i] == " " for i in gaps), (line, gaps)
        assert display_width(line) <= display_width(rule)  # nothing reaches past the last column
