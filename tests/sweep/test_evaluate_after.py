"""A metric computed after training is part of the sweep: each run's job trains it, then runs ``ablate evaluate`` with
the sweep's ``evaluate:`` options (averaged checkpoints, beam search on the test split), and result.json records the
score and the options; a relaunch evaluates a run that trained but was not evaluated (killed in between), trains
nothing again, and evaluates nothing twice; the report judges the score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sacrebleu
from ablate.report import build_report
from tests.conftest import REPO, TRANSLATION
from tests.sweep.conftest import ablate_here, plan_of, run_attempts

pytestmark = pytest.mark.slow


def _sweep(tmp: Path, data: Path) -> Path:
    overrides = ", ".join([*TRANSLATION, f"data.path={data}", f"data.cache_dir={tmp / 'cache'}"])
    path = tmp / "sweep.yaml"
    path.write_text(f"""
name: bleu
base: {{config: {REPO / 'configs' / 'multi30k.yaml'}, overrides: [{overrides}]}}
rows:
  - {{name: base}}
  - {{name: wide, model.d_ff: 128}}
parameters:
  seed: {{values: [0, 1]}}
evaluate: {{average_last: 2, beam: 2}}
decide:
  metrics:
    - {{name: val/loss, goal: minimize, margin: 0.05}}
    - {{name: test/bleu, goal: maximize, margin: 1.0}}
""")
    return path


def _result(sweep_dir: Path, run: dict) -> dict:
    return json.loads((sweep_dir / run["run_dir"] / "result.json").read_text())


def test_each_run_is_evaluated_in_its_job_and_a_relaunch_evaluates_only_what_was_not(shared_data, tmp_path):
    path = _sweep(tmp_path, shared_data / "multi30k")
    done = ablate_here("sweep", str(path), "--workers", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    sweep_dir = tmp_path / "sweeps" / "bleu"
    runs = plan_of(sweep_dir)["runs"]
    options = ["--average-last", "2", "--beam", "2"]
    for run in runs:
        result = _result(sweep_dir, run)
        assert result["status"] == "finished" and result["evaluated"] == options
        # the score is sacreBLEU's on the translations the evaluation wrote, against the test split's references
        hypotheses = (sweep_dir / run["run_dir"] / "translations.test.txt").read_text().splitlines()
        references = [line.strip() for line in (shared_data / "multi30k" / "test_2016_flickr.de").read_text()
                      .splitlines()]
        assert result["decode"]["split"] == "test" and len(hypotheses) == len(references) == 1000
        assert result["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)

    killed = runs[1]  # trained, then killed before its evaluation: no score, no record of one
    result = _result(sweep_dir, killed)
    for key in ("evaluated", "test/bleu"):
        del result[key]
    (sweep_dir / killed["run_dir"] / "result.json").write_text(json.dumps(result))
    before = {r["id"]: (sweep_dir / r["run_dir"] / "evaluate.log").stat().st_mtime_ns for r in runs}
    trained = run_attempts(sweep_dir)
    again = ablate_here("sweep", str(path), "--workers", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert run_attempts(sweep_dir) == trained  # nothing trained again
    after = {r["id"]: (sweep_dir / r["run_dir"] / "evaluate.log").stat().st_mtime_ns for r in runs}
    assert [r["id"] for r in runs if after[r["id"]] != before[r["id"]]] == [killed["id"]]  # evaluated once more
    assert _result(sweep_dir, killed)["evaluated"] == options and "test/bleu" in _result(sweep_dir, killed)

    report = build_report(sweep_dir)
    wide = next(row for row in report.variants if row.name == "wide")
    assert "test/bleu" in wide.judged and wide.judged["test/bleu"].n == 2  # judged on both seeds' scores
