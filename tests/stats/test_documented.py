"""One owner for each documented figure of what the verdicts mean: ``benchmarks/verdicts.json``, written by
``python benchmarks/verdicts.py --record``. The README, docs/verdicts.md, the docstrings and the tests that quote a
figure read the same number as the record, rounded as they print it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ablate.report.build import judge_runs
from ablate.stats import skew
from tests.stats import test_stopped

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import _verdict_docs  # noqa: E402  (benchmarks/ is no package)

RECORD = json.loads((REPO / "benchmarks" / "verdicts.json").read_text())["results"]
DOCS = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])


def test_the_survivors_only_rates_of_hyperband_sweeps_read_the_same_everywhere():
    """The issue's four values (13 % and 19 %, 0.111 and 0.171, 9 %, 13 % and 20 %) are one pair, the record's."""
    percent = _verdict_docs.survivors_percent(RECORD)
    said = re.findall(r"pairing the survivors called a row with no effect, noisier than the base,\s+\*better\* in "
                      r"(\d+) % of simulated tables, and a row truly worse in (\d+) %", DOCS)
    assert said and all(list(pair) == percent for pair in said)
    docstring = re.search(r"called \*better\* in (\d+)% of null tables", " ".join(judge_runs.__doc__.split()))
    assert docstring[1] == percent[0]
    quoted = re.search(r"\*better\* in (\d+)% and (\d+)% of tables", " ".join(
        test_stopped.test_a_stopped_seed_never_makes_its_row_look_better.__doc__.split()))
    assert list(quoted.groups()) == percent


def test_the_readmes_calibration_figures_are_the_records():
    """Every README line of "How sure is this?" that quotes verdicts.py (the power table and what was simulated),
    the look-again rule's rate in its prose, and the skew module's rate at 3 seeds."""
    for line in _verdict_docs.readme_rows(RECORD):
        assert line in DOCS, line
    skewed = RECORD["skewed, n=3, t at the row's level: some verdict false | power at 1 sd, lognormal | normal"][0]
    assert f"some verdict of a table was false in {100 * skewed:.1f} %" in " ".join(skew.__doc__.split())
    looked_again = re.findall(r"end(?:s|ed) in a false verdict in ([\d.]+) %", " ".join(DOCS.split()))
    assert looked_again == [f"{100 * RECORD['old rule: fixed test after each added seed, 3→10']:.1f}"]


def test_docs_verdicts_tables_are_the_records():
    """docs/verdicts.md's tables (the failure guard and the printed bounds before and after, the skew rules' error
    and power) are what ``verdicts.py --record`` printed."""
    page = (REPO / "docs" / "verdicts.md").read_text()
    for table in _verdict_docs.verdicts_tables(RECORD):
        assert table in page, table
