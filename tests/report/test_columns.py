"""The variant table's columns are one table (:mod:`ablate.report.columns`) that every format reads: a column added
to it reaches the terminal, Markdown, HTML, table.csv and the W&B table, and each entry's raw values line up with its
CSV names on every row."""

from __future__ import annotations

import csv
import io

import pytest

from ablate.report import build_report, format_markdown, format_terminal
from ablate.report import columns as C
from ablate.report.html import render_html
from ablate.report.records import table_columns, table_records, to_csv
from ablate.report.render import drop_order, view
from ablate.report.text import display_cells, display_headers
from ablate.stats.design import Design, Margin
from tests.report.conftest import make_sweep, make_verdict_sweep
from tests.report.test_verdicts import BASE, make


@pytest.fixture(scope="module", params=["fabricated", "sequential with a margin", "fixed with a margin"])
def report(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("columns")
    if request.param == "fabricated":
        return build_report(make_sweep(root))
    if request.param == "sequential with a margin":
        return build_report(make_verdict_sweep(root))
    return build_report(make(root, {"base": BASE, "v": [(s, v + 0.2) for s, v in BASE]},
                             design=Design(margin=Margin(0.3))))


def test_each_column_gives_one_raw_value_per_csv_name_on_every_row(report):
    for column in C.columns(report):
        assert all(len(column.raw(row)) == len(column.csv) for row in report.variants), column.csv
    assert all(len(record) == len(table_columns(report)) for record in table_records(report))


def test_csv_names_are_unique_and_every_displayed_column_has_a_title_a_cell_and_a_place(report):
    names = table_columns(report)
    assert len(names) == len(set(names))
    shown = C.displayed(report)
    assert all(c.title and c.cell is not None for c in shown)
    assert display_headers(report) == [c.title for c in shown]
    assert all(len(display_cells(report, row)) == len(shown) for row in report.variants)


def test_a_design_shows_the_columns_that_apply_to_it_and_the_csv_keeps_them_all(report):
    headers = display_headers(report)
    assert ("decided at" in headers) == report.design.sequential
    assert any(h.startswith("seeds for ±") for h in headers) == (report.design.margin is not None)
    assert {"decided_at", "seeds_for_margin_low", "margin"} <= set(table_columns(report))


def test_the_verdict_view_and_the_drop_order_come_from_the_entries(report):
    headers, _, left = view(report, report.variants, wide=False)
    assert headers[0] == "variant" and headers[-1] == "verdict" and {0, len(headers) - 1} <= left
    assert drop_order(report) == [headers[2], headers[1], headers[3], headers[4]]  # runs, metric, Δ, interval


def test_one_entry_reaches_every_format(report, monkeypatch):
    """A new statistic is one :class:`Column`: its title and cell print in the terminal, Markdown and HTML, its raw
    value goes to table.csv and the W&B table (which read the same records)."""
    extra = C.Column(("answer",), lambda row: [42], "answer", lambda row: "forty-two", shown=14.5)
    costs = C._costs
    monkeypatch.setattr(C, "_costs", lambda r: [*costs(r), extra])
    rows = list(csv.DictReader(io.StringIO(to_csv(table_columns(report), table_records(report)))))
    assert [row["answer"] for row in rows] == ["42"] * len(report.variants)
    headers = display_headers(report)
    assert headers.index("answer") == headers.index("wall time") + 1
    for text in (format_terminal(report, wide=True), format_markdown(report), render_html(report)):
        assert "answer" in text and "forty-two" in text
