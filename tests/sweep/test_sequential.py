"""A sequential sweep for real: seeds go to the rows still undecided (and the base), each row stops at the look that
decides it, the report and the queue agree on when that was, a relaunch trains nothing, and a sweep killed half way
ends, once relaunched, with the verdicts and the runs of one that was not (but for seeds started ahead of a look)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from ablate.report import build_report
from tests.sweep.conftest import (DECIDING_ROWS as ROWS, ablate_cli, ablate_here, plan_of, run_attempts,
                                  run_statuses, sweep_file)

pytestmark = pytest.mark.slow

SEQUENTIAL = """
parameters:
  seed: {values: [0, 1, 2]}
decide: {max_seeds: 5, margin: 0.05}
"""


def _sequential(tmp: Path) -> Path:
    path = sweep_file(tmp, ROWS, name="seq")
    path.write_text(path.read_text() + SEQUENTIAL)
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sequential")
    done = ablate_here("sweep", str(_sequential(tmp)), "--workers", "2", cwd=tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    (tmp / "stderr.txt").write_text(done.stderr)
    return tmp / "sweeps" / "seq"


def _seeds(sweep_dir: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for run in plan_of(sweep_dir)["runs"]:
        out.setdefault(run["variant"], []).append(run["seed"])
    return out


def test_rows_get_seeds_until_decided_and_the_report_says_when(finished):
    seeds, report = _seeds(finished), build_report(finished)
    assert report.design.sequential and report.design.max_seeds == 5
    for row in report.variants:
        if row.is_base:
            continue
        c = row.comparison
        assert seeds[row.name] == list(range(len(seeds[row.name])))  # 0, 1, 2, then 3, 4 in order
        assert (c.decided_at or 5) <= len(seeds[row.name]) <= min(5, (c.decided_at or 5) + 1), (row.name, c)
    assert seeds["base"] == list(range(max(len(s) for s in seeds.values())))  # the base kept pace
    # (a row may have the seed after its deciding look: started ahead while a worker would idle, it changes nothing)
    stalled = next(r for r in report.variants if r.name == "stalled").comparison
    assert stalled.verdict == "worse" and stalled.decided_at == 3  # a model that barely trains: decided at once
    assert set(run_statuses(finished)) == {"finished"}


def test_the_sweep_says_what_the_dry_run_says_and_its_line_ends_at_the_last_look(finished):
    report, seeds = build_report(finished), _seeds(finished)
    err = (finished.parent.parent / "stderr.txt").read_text()
    assert err.startswith("ablate: sweep seq: 9 runs to start, 15 at most (a seed at a time to the rows still "
                          "undecided)\n")
    last = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("sweep: look at")][-1]
    decided = sum(r.comparison.decided_at is not None for r in report.variants if not r.is_base)
    n = sum(len(s) for s in seeds.values())
    assert last.split(" · ")[0] == (f"sweep: look at {max(map(len, seeds.values()))} seeds: "
                                    f"{n}/{n} runs done (15 at most)")
    assert last.split(" · ")[1:] == [f"{decided} of 2 decided", "this look's runs have ended"]


def test_a_relaunch_of_a_decided_sweep_trains_nothing(finished):
    before, plan = run_attempts(finished), plan_of(finished)
    again = ablate_here("sweep", str(finished.parent.parent / "sweep.yaml"), cwd=finished.parent.parent)
    assert again.returncode == 0, again.stderr[-2000:]
    assert run_attempts(finished) == before and plan_of(finished)["runs"] == plan["runs"]
    n = len(plan["runs"])
    assert f"ablate: sweep seq: nothing left to train: its {n} runs ended in earlier launches ({n} finished)" in \
        again.stderr


def test_a_killed_sequential_sweep_ends_with_the_runs_of_an_uninterrupted_one(finished, tmp_path):
    path = _sequential(tmp_path)
    sweep_dir = tmp_path / "sweeps" / "seq"
    proc = ablate_cli("sweep", str(path), "--workers", "2", cwd=tmp_path, background=True)
    deadline = time.time() + 300
    while time.time() < deadline and Counter(run_statuses(sweep_dir) if (sweep_dir / "plan.json").is_file()
                                             else []).get("finished", 0) < 4:
        time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = ablate_cli("sweep", str(path), "--workers", "2", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert set(run_statuses(sweep_dir)) == {"finished"}
    mine, theirs = build_report(sweep_dir), build_report(finished)
    assert [(r.name, r.comparison and (r.comparison.verdict, r.comparison.decided_at)) for r in mine.variants] == \
        [(r.name, r.comparison and (r.comparison.verdict, r.comparison.decided_at)) for r in theirs.variants]
    needed = {(r.name, s) for r in theirs.variants if not r.is_base
              for s in range(r.comparison.decided_at or 5)}  # the seeds each row's verdict reads, in either sweep
    have = lambda d: {(r["variant"], r["seed"]) for r in plan_of(d)["runs"]}  # noqa: E731
    assert needed <= have(sweep_dir) and needed <= have(finished)
    values = {r["id"]: json.loads((sweep_dir / r["run_dir"] / "result.json").read_text())["final"]["val/loss"]
              for r in plan_of(sweep_dir)["runs"]}
    theirs_values = {r["id"]: json.loads((finished / r["run_dir"] / "result.json").read_text())["final"]["val/loss"]
                     for r in plan_of(finished)["runs"]}
    shared = values.keys() & theirs_values.keys()  # all but seeds started ahead in one of the two
    assert {k: values[k] for k in shared} == {k: theirs_values[k] for k in shared}  # killed, resumed: bit-identical


def test_a_stratified_sequential_sweep_adds_seeds_to_every_cell_of_an_undecided_contrast(tmp_path):
    """Rows x a parameter: each contrast (a row within a stratum, a main effect, a simple effect, the interaction)
    asks for seeds in all of its cells until it is decided; each cell ends with the seeds of the most demanding
    contrast it belongs to."""
    path = sweep_file(tmp_path, ROWS.replace("- {name: dropout, model.dropout: 0.12}\n", ""), name="strata")
    path.write_text(path.read_text() + """
parameters:
  model.attention_dropout: {values: [0.0, 0.05]}
  seed: {values: [0, 1, 2]}
decide: {max_seeds: 4, margin: 0.05}
""")
    done = ablate_here("sweep", str(path), "--workers", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    sweep_dir = tmp_path / "sweeps" / "strata"
    plan, seeds, report = plan_of(sweep_dir), _seeds(sweep_dir), build_report(sweep_dir)
    assert [f["name"] for f in plan["factors"]] == ["row", "model.attention_dropout"]
    assert report.strata == ["attention_dropout=0", "attention_dropout=0.05"] and len(report.effects) == 5
    demand: dict[str, int] = {}
    contrasts = [(r.comparison, (r.name, r.base_name)) for r in report.variants if not r.is_base]
    contrasts += [(e.comparison, e.contrast.cells) for e in report.effects]
    for c, cells in contrasts:
        for cell in cells:
            demand[cell] = max(demand.get(cell, 0), c.decided_at or 4)
    assert all(demand[v] <= len(s) <= min(4, demand[v] + 1) for v, s in seeds.items()), (seeds, demand)  # + ahead
    assert all(s == list(range(len(s))) for s in seeds.values())
