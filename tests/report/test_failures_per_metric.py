"""table.csv gives every judged metric its own failure counts and failure test, not the headline's alone: a run that
failed counts against its row on each metric, a run that finished without logging a metric (test BLEU, when
``ablate evaluate`` did not run) is no outcome of that metric. The counts are read again here from the runs, and the
p is Fisher's exact two-sided test from scipy, as docs/statistics.md states, tested where the two failure rates
differ and blank where they are equal."""

from __future__ import annotations

import csv
import io
import json

import pytest
from scipy import stats

from ablate.report import build_report
from ablate.report.records import table_columns, table_records, to_csv
from tests.report.test_several_metrics import SEEDS, make

FAILED = {("h=1", 1), ("h=1", 3), ("N=1", 0)}  # (row, seed): the run raised
NO_BLEU = {("base", 2), ("h=16", 4)}  # finished, but never evaluated: no test/bleu
METRICS = {"val/loss": "", "test/bleu": "test/bleu_"}  # the CSV's prefix of each judged metric's columns


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> dict[str, dict[str, str]]:
    sweep, _ = make(tmp_path_factory.mktemp("failures"))
    for row, seed in FAILED | NO_BLEU:
        path = sweep / "runs" / f"{row.replace('=', '')}-s{seed}" / "result.json"
        result = json.loads(path.read_text())
        if (row, seed) in FAILED:
            result = {"status": "failed", "step": 10, "error": "RuntimeError: boom"}
        else:
            del result["test/bleu"]
        path.write_text(json.dumps(result))
    report = build_report(sweep)
    return {r["variant"]: r for r in csv.DictReader(io.StringIO(to_csv(table_columns(report), table_records(report))))}


def ended(row: str, metric: str) -> set[int]:
    """The row's seeds that are outcomes of ``metric``: failed, or finished with a value of it."""
    return {s for s in range(SEEDS) if metric == "val/loss" or (row, s) not in NO_BLEU}


def counts(row: str, metric: str) -> tuple[int, int, int, int]:
    """Failed runs and runs of the row and of the base over the seeds both ended (the comparison pairs them)."""
    shared = ended(row, metric) & ended("base", metric)
    return (sum((row, s) in FAILED for s in shared), len(shared), sum(("base", s) in FAILED for s in shared),
            len(shared))


def test_the_csv_has_each_judged_metric_s_failure_columns(table):
    for prefix in METRICS.values():
        assert {f"{prefix}{n}" for n in ("row_failed", "row_runs", "base_failed", "base_runs", "failure_p")} <= \
            set(table["base"])


@pytest.mark.parametrize("metric", METRICS)
def test_each_metric_s_counts_and_fisher_p_are_its_own(table, metric):
    prefix = METRICS[metric]
    for row in ("h=1", "h=16", "N=1"):
        got = table[row]
        row_failed, row_runs, base_failed, base_runs = counts(row, metric)
        assert [int(got[prefix + n]) for n in ("row_failed", "row_runs", "base_failed", "base_runs")] == \
            [row_failed, row_runs, base_failed, base_runs], (row, metric)
        if row_failed * base_runs == base_failed * row_runs:
            assert got[prefix + "failure_p"] == "", (row, metric)  # equal rates: nothing to test
        else:
            p = stats.fisher_exact([[row_failed, row_runs - row_failed], [base_failed, base_runs - base_failed]]).pvalue
            assert float(got[prefix + "failure_p"]) == pytest.approx(p), (row, metric)


def test_the_two_metrics_count_differently_where_a_run_logged_one_alone(table):
    h1, h16 = table["h=1"], table["h=16"]
    assert (h16["row_runs"], h16["test/bleu_row_runs"]) == (str(SEEDS), str(SEEDS - 2))  # seeds 2 and 4 unpaired
    assert (h1["row_failed"], h1["row_runs"], h1["test/bleu_row_failed"], h1["test/bleu_row_runs"]) == \
        ("2", "5", "2", "4")
    assert h1["failure_p"] != h1["test/bleu_failure_p"]  # 2/5 vs 0/5, then 2/4 vs 0/4
