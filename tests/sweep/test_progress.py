"""What a sweep says about its progress: the note before it trains (what it starts, what a relaunch resumes, that
nothing was left) and a sequential sweep's progress line, against hand computations."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from ablate.sweep.progress import look_line, start_note, time_left
from ablate.sweep.queue import Look

LOOK = Look(seeds=4, planned=16, most=40, decided=1, contrasts=3, runs=frozenset({"a4", "b4", "c4", "d4"}))


def test_time_left_is_this_look_s_mean_run_for_each_round_of_workers():
    seconds = {"a4": 10.0, "b4": 20.0, "x3": 500.0}  # x3: a run of an earlier look, not counted
    ended = {"a4", "b4", "x3"}
    assert time_left(LOOK, ended, seconds, workers=2) == 15.0 * 1  # 2 left, 2 at once: one round of 15 s
    assert time_left(LOOK, ended, seconds, workers=1) == 15.0 * 2
    assert time_left(LOOK, {"x3"}, {"x3": 500.0}, workers=2) is None  # none of this look has ended


def test_the_line_says_the_look_the_runs_the_decided_rows_and_the_time_left():
    ended = {f"r{i}" for i in range(12)} | {"a4", "b4"}
    assert look_line(LOOK, ended, {"a4": 60.0, "b4": 70.0}, workers=2) == (
        "look at 4 seeds: 14/16 runs done (40 at most) · 1 of 3 decided · about 1m 05s left at this look")
    assert look_line(LOOK, ended | LOOK.runs, {}, workers=2).endswith("· this look's runs have ended")
    assert look_line(LOOK, set(), {}, workers=2).endswith("time left: once a run of this look has ended")


def _runs(tmp_path: Path, statuses: dict[str, str | None], checkpoints: tuple[str, ...] = ()) -> list:
    runs = []
    for rid, status in statuses.items():
        run_dir = tmp_path / "runs" / rid
        run_dir.mkdir(parents=True)
        if status:
            (run_dir / "result.json").write_text(json.dumps({"status": status}))
        if rid in checkpoints:
            (run_dir / "checkpoints").mkdir()
            (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"")
        runs.append(SimpleNamespace(id=rid, run_dir=f"runs/{rid}"))
    return runs


def test_a_first_launch_says_what_it_starts_and_the_most_it_may_train(tmp_path):
    runs = _runs(tmp_path, {f"r{i}": None for i in range(12)})
    assert start_note("q", runs, runs, tmp_path, most=40) == (
        "ablate: sweep q: 12 runs to start, 40 at most (a seed at a time to the rows still undecided)")
    assert start_note("q", runs, runs, tmp_path, most=None) == "ablate: sweep q: 12 runs to start"


def test_a_relaunch_says_what_ended_and_what_it_resumes(tmp_path):
    runs = _runs(tmp_path, {"a": "finished", "b": "finished", "c": "failed", "d": "interrupted", "e": None},
                 checkpoints=("d",))
    todo = runs[3:]
    assert start_note("q", runs, todo, tmp_path, most=None) == (
        "ablate: sweep q: 3 of 5 runs ended in earlier launches (2 finished, 1 failed) (--retry-failed trains the "
        "failed ones again); 2 to train, 1 of them from their last checkpoint")


def test_a_relaunch_with_nothing_left_says_so(tmp_path):
    runs = _runs(tmp_path, {"a": "finished", "b": "stopped"})
    assert start_note("q", runs, [], tmp_path, most=10) == (
        "ablate: sweep q: nothing left to train: its 2 runs ended in earlier launches (1 finished, 1 stopped)")


def test_off_a_terminal_the_pool_s_progress_is_a_line_per_update_each_once():
    import io

    from ablate.sweep.progress import LogLines, progress_bar

    stream = io.StringIO()  # not a terminal: a log file
    bar = progress_bar(total=3, initial=1, desc="sweep", disable=False, stream=stream)
    assert isinstance(bar, LogLines) and stream.getvalue() == ""  # nothing until a run ends
    for done in (2, 3):
        bar.set_postfix(done=done, stopped=0, failed=0, refresh=False)
        bar.update(1)
    bar.close()
    lines = stream.getvalue().split("\n")
    assert "\r" not in stream.getvalue() and lines[-1] == "" and len(lines) == 3
    for line, n in zip(lines, (2, 3)):
        assert re.fullmatch(rf"sweep: {n}/3 runs \[00:0\d\] done={n}, stopped=0, failed=0", line), line
    look = progress_bar(total=None, initial=0, desc="sweep: look at 3 seeds: ...", disable=False, stream=stream,
                        bar_format="{desc}")
    look.set_description_str("sweep: look at 3 seeds: 1/9 runs done", refresh=False)
    look.update(1)
    assert stream.getvalue().splitlines()[-1] == "sweep: look at 3 seeds: 1/9 runs done"
