"""The terminal report fits the terminal it prints to: ``COLUMNS``, else the terminal's width, else 120 off a terminal.

Narrower than the verdict view, it gives up columns in :func:`ablate.report.render.drop_order`'s order (the runs, the
headline metric, Δ, then the interval; the variant and its verdict never), wraps the verdict under itself and the prose
lines to the width; ``--wide`` prints every column however wide. No line is longer than the width except one that
holds a single token that cannot be broken (a long variant name, a path) or a row's name alone."""

from __future__ import annotations

import io
import os
import re

import pytest

from ablate.report import build_report, format_terminal
from ablate.report.render import WIDTH, drop_order, terminal_width
from ablate.report.text import display_headers, interval_header, label
from ablate.stats.design import Design, Margin
from tests.report.conftest import make_verdict_sweep
from tests.report.test_verdicts import BASE, make

ESCAPE = re.compile(r"\033\[[0-9;]*m")
LONG = "a-variant-name-of-forty-characters-----"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Rows with a long verdict (equivalent, worse by less than the margin), a pending run and a long name."""
    values = {"base": BASE, LONG: [(s, v + 0.1 + 0.005 * s) for s, v in BASE],
              "v": [(0, 3.0), (1, 3.1), (2, 2.9), (3, "running")]}
    return build_report(make(tmp_path_factory.mktemp("width"), values, design=Design(margin=Margin(0.2))))


def _too_long(text: str, width: int, names: set[str] = frozenset()) -> list[str]:
    """The lines longer than ``width`` (escape codes not counted) that hold more than one token, and are not one of
    ``names`` alone (a name is a table's first cell: a row's or an effect's, never broken)."""
    lines = [ESCAPE.sub("", line) for line in text.splitlines()]
    return [line for line in lines if len(line) > width and len(line.split()) > 1 and line.strip() not in names]


def _header(text: str, report) -> list[str]:
    """The table's column titles, read off its header (from the line that starts with ``variant`` to the rule)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("variant"))
    line = " ".join(lines[at:next(i for i in range(at, len(lines)) if lines[i].startswith("-"))])
    titles = [label(report.metric), "runs", f"Δ {label(report.metric)}", interval_header(report), "verdict"]
    return ["variant", *(t for t in titles if t in line)]


@pytest.mark.parametrize("width", [120, 100, 80, 60, 40, 30, 20, 12, 1])
@pytest.mark.parametrize("colour", [False, True])
def test_no_line_is_longer_than_the_width_but_a_single_unbreakable_token(report, width, colour):
    text = format_terminal(report, width=width, colour=colour)
    assert not _too_long(text, width), text
    words = " ".join(ESCAPE.sub("", text).split())
    assert "equivalent (worse, by less than the margin)" in words  # the verdict whole, wrapped as it may be
    assert words.count(LONG) == 1 and " v " in f" {words} "  # every row


def test_columns_go_in_the_stated_order_as_the_terminal_narrows_the_verdict_last(report):
    order = drop_order(report)
    assert order[-1] == interval_header(report) and "verdict" not in order and "variant" not in order
    gone_before: list[str] = []
    for width in range(130, 0, -1):  # narrower and narrower: what is gone stays gone, in the stated order
        kept = _header(format_terminal(report, width=width), report)
        gone = [t for t in order if t not in kept]
        assert gone == order[:len(gone)] and gone[:len(gone_before)] == gone_before, (width, kept)
        assert kept[0] == "variant" and kept[-1] == "verdict"
        gone_before = gone
    assert gone_before == order  # at one column every droppable column is gone


def test_at_120_columns_every_column_of_the_verdict_view_and_at_80_some_go(report):
    wide_enough, narrow = format_terminal(report, width=WIDTH), format_terminal(report, width=80)
    assert _header(wide_enough, report) == ["variant", label(report.metric), "runs", f"Δ {label(report.metric)}",
                                            interval_header(report), "verdict"]
    # 39 + 2 + 16 (the interval) + 2 + 16 (the verdict, wrapped) fit 80; with Δ's 10 + 2 more they would not
    assert _header(narrow, report) == ["variant", interval_header(report), "verdict"]
    assert wide_enough != narrow


def test_wide_prints_every_column_however_narrow_the_terminal(report):
    text = format_terminal(report, wide=True, width=80)
    header = next(line for line in text.splitlines() if line.startswith("variant"))
    assert all(title in header for title in display_headers(report))
    assert max(map(len, text.splitlines())) > 80  # the table: its prose is still wrapped
    assert not _too_long("\n".join(line for line in text.splitlines() if not line.startswith(("variant", "-", "base",
                                                                                              LONG, "v "))), 80)


class Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_width_is_columns_else_the_terminal_s_else_120(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert terminal_width(Stream(tty=False)) == terminal_width(Stream(tty=True)) == 80
    monkeypatch.delenv("COLUMNS")
    assert terminal_width(Stream(tty=False)) == WIDTH  # a pipe, a log file
    # an os.terminal_size: pytest's own writer asks for the size during the test too
    monkeypatch.setattr("shutil.get_terminal_size", lambda fallback=(80, 24): os.terminal_size((93, 24)))
    assert terminal_width(Stream(tty=True)) == 93


def test_ablate_report_fits_columns_80_and_120(tmp_path, capsys, monkeypatch):
    from ablate.cli import main

    sweep = make_verdict_sweep(tmp_path, {"base": (4, 0.0), "a-longer-variant-name": (4, 0.05), "b": (4, 0.3)})
    printed = {}
    for width in (80, 120, 30):
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["report", str(sweep)]) == 0
        printed[width] = capsys.readouterr().out
        assert not _too_long(printed[width], width), printed[width]
    assert printed[80] != printed[120] and max(map(len, printed[120].splitlines())) > 80


@pytest.mark.parametrize("design", ["two factors", "ladder"])
def test_the_effects_and_trends_tables_fit_too(tmp_path, design):
    from tests.report.test_factorial import FACTORS, LADDER, XIONG, ladder, make as make_factorial, two_by_two

    values, factors = (two_by_two(XIONG), FACTORS) if design == "two factors" else (ladder([0.1, 0.2, 0.3]), LADDER)
    report = build_report(make_factorial(tmp_path, values, factors))
    names = {e.contrast.label for e in report.effects} | {row.name for row in report.variants}
    for width in (120, 80, 50, 30, 10):
        text = format_terminal(report, width=width)
        assert not _too_long(text, width, names), text
        assert ("effects:" if design == "two factors" else "across sizes:") in " ".join(text.split())
    words = " ".join(format_terminal(report, width=50).split())
    if design == "two factors":
        assert "interaction: the effect depends on the other factor" in words  # the verdict whole, wrapped
    else:
        assert "rope +0.052 [+0.047, +0.057] grows" in words  # the slope, its interval and its trend stay
