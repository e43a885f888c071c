"""A run's ``result.json`` has one writer (:func:`ablate.runs.files.write_result`): whole, or merged over the record
already there."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ablate.runs.files import RESULT_FILE, read_result, write_result

PACKAGE = Path(__file__).resolve().parents[2] / "ablate"


def test_a_result_written_whole_replaces_the_record_and_a_merged_one_keeps_it(tmp_path):
    write_result(tmp_path, {"status": "failed", "error": "boom", "step": 3})
    write_result(tmp_path, {"status": "finished", "step": 5})
    assert read_result(tmp_path) == {"status": "finished", "step": 5}  # the earlier error no longer applies
    write_result(tmp_path, {"evaluated": ["--beam", "4"]}, merge=True)
    assert json.loads((tmp_path / RESULT_FILE).read_text()) == {"status": "finished", "step": 5,
                                                                "evaluated": ["--beam", "4"]}
    assert [p.name for p in tmp_path.iterdir()] == [RESULT_FILE]  # atomic: no temporary file left beside it


def test_no_module_but_the_run_folders_owner_writes_a_result_json():
    writes = re.compile(r"write_(json|atomic)\(\s*(result_path\(|[^,()]*RESULT_FILE)")
    found = [f"{p.relative_to(PACKAGE)}:{n}" for p in PACKAGE.rglob("*.py") if p.name != "files.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if writes.search(line)]
    assert found == []
