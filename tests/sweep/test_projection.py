"""The cost before the launch: the makespan over workers against the best packing found by brute force, a sequential
design's fewest and most runs against its plan, the probe's scaling of its timed steps to the run's config, the dry
run's printed projection, projection.json at the launch, and the report's projected against actual."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from pathlib import Path

import pytest
import torch

import ablate
from ablate.data import build_task
from ablate.runs.projection import RunCost, duration
from ablate.sweep import probe, slots
from ablate.sweep.projection import PROBE_ENV, job_seconds, makespan, probing_on, project, projection_lines
from tests.conftest import REPO, TINY, TRANSLATION
from tests.sweep.conftest import FAST, ablate_here, plan_of, sweep_file


def best_packing(durations: list[float], workers: int) -> float:
    """The least makespan of any assignment of the jobs to the workers (every assignment tried)."""
    best = math.inf
    for owners in itertools.product(range(workers), repeat=len(durations)):
        loads = [0.0] * workers
        for d, w in zip(durations, owners):
            loads[w] += d
        best = min(best, max(loads))
    return best


@pytest.mark.parametrize("durations, workers", [([5.0], 1), ([3, 3, 2, 2, 2], 2), ([7, 1, 1, 1, 1, 1, 1], 2),
                                                ([4, 4, 3, 3, 2, 2], 3), ([9, 8, 2, 2, 2, 1], 2),
                                                ([1, 2, 3], 5), ([6, 5, 4, 3, 2, 1], 3)])
def test_the_makespan_is_at_most_four_thirds_of_the_best_packing_and_no_less_than_it(durations, workers):
    best = best_packing(list(map(float, durations)), workers)
    greedy = makespan(durations, workers)
    assert best <= greedy <= (4 / 3 - 1 / (3 * workers)) * best + 1e-9  # Graham's bound for LPT


def test_longest_first_gives_seven_where_the_best_packing_is_six():
    # 3+3 | 2+2+2 is best; longest first puts 3 and 3 apart, then the 2s: 3+2+2 | 3+2
    assert best_packing([3, 3, 2, 2, 2], 2) == 6 and makespan([3, 3, 2, 2, 2], 2) == 7


def test_identical_runs_take_their_rounds_of_the_workers():
    assert makespan([10.0] * 7, 3) == 30.0 and makespan([10.0] * 6, 3) == 20.0 and makespan([], 2) == 0.0
    with pytest.raises(ValueError):
        makespan([1.0], 0)


def test_a_seed_array_sets_up_once_and_trains_its_members_in_turn():
    c = RunCost(train=10, validate=2, evaluate=3, other=4)
    assert job_seconds([c, c, c]) == 4 + 3 * 15 and job_seconds([c]) == c.total == 19 and job_seconds([]) == 0


def test_a_sequential_design_adds_a_seed_of_every_variant_at_each_later_look():
    a, b = RunCost(train=8, other=2), RunCost(train=15, validate=3, evaluate=2)
    p = project([["a"], ["a"], ["b"], ["b"]], {"a": a, "b": b}, 2, later_looks=3)
    assert p.runs == 4 and p.seconds == makespan([10, 10, 20, 20], 2) == 30
    assert p.most_runs == 4 + 3 * 2 and p.most_seconds == 30 + 3 * makespan([10, 20], 2) == 90
    assert p.parts == {"train": 46, "validate": 6, "evaluate": 4, "other": 4}
    assert p.most_parts == {"train": 46 + 3 * 23, "validate": 6 + 9, "evaluate": 4 + 6, "other": 4 + 6}
    fixed = project([["a", "a"], ["b"]], {"a": a, "b": b}, 1)  # one array of two and a run alone, one worker
    assert fixed.most_runs is None and fixed.runs == 3 and fixed.seconds == (2 + 16) + 20


def test_seconds_print_in_seconds_with_minutes_or_hours_beside_them():
    assert duration(95) == "95 s" and duration(754) == "754 s (12.6 min)" and duration(9000) == "9000 s (2.5 h)"


def test_probing_is_off_in_the_test_suite_and_on_unless_the_variable_says_off(monkeypatch):
    assert os.environ[PROBE_ENV] == "off" and not probing_on()
    monkeypatch.delenv(PROBE_ENV)
    assert probing_on()
    for word in ("0", "false", "OFF", "no"):
        monkeypatch.setenv(PROBE_ENV, word)
        assert not probing_on()


def test_validations_are_every_val_every_steps_and_at_the_last():
    cfg = ablate.load_config(None, TINY + ["train.max_steps=10", "train.val_every=4"])
    assert probe.validations(cfg) == 3  # at 4, 8 and 10
    cfg = ablate.load_config(None, TINY + ["train.max_steps=12", "train.val_every=4"])
    assert probe.validations(cfg) == 3


def test_the_probe_scales_its_timed_step_and_batch_to_the_run_and_leaves_the_random_streams(monkeypatch):
    monkeypatch.setattr(probe, "_timed", lambda fn, device: (fn(), 0.5)[1])
    cfg = ablate.load_config(None, FAST + ["train.max_steps=40", "train.val_every=10", "train.keep_checkpoints=0"])
    torch.manual_seed(3)
    before = torch.get_num_threads()
    cost = probe.probe_run(cfg, None, threads=1)
    after = torch.rand(1)
    torch.manual_seed(3)
    assert torch.equal(after, torch.rand(1)) and torch.get_num_threads() == before
    data = build_task(cfg)
    data.setup("fit")
    batches = len(data.val_dataloader())
    assert cost.train == 0.5 * 40 and cost.validate == 0.5 * batches * 4 and cost.evaluate == 0
    assert cost.other > 0.5 * 2 * 4  # the model's and data's build, and best and last at each of 4 validations
    assert os.environ.get("WANDB_MODE") != "disabled"


def test_the_evaluate_probe_decodes_a_few_sentences_scaled_to_the_split(shared_data, tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "_timed", lambda fn, device: (fn(), 0.5)[1])
    cfg = ablate.load_config(REPO / "configs/multi30k.yaml", TRANSLATION + [
        f"data.path={shared_data / 'multi30k'}", f"data.cache_dir={tmp_path / 'cache'}"])
    cost = probe.probe_run(cfg, {"beam": 2}, threads=1)
    assert cost.evaluate == 0.5 * 1000 / probe.DECODED_SENTENCES  # the 1,000 sentences of test_2016_flickr


ROWS = """
    - {name: base}
    - {name: wide, model.d_ff: 96}
"""


def _sequential(tmp_path: Path) -> Path:
    path = sweep_file(tmp_path, ROWS)
    path.write_text(path.read_text() + "parameters:\n  seed: {values: [0, 1]}\ndecide: {margin: 0.1, max_seeds: 4}\n")
    return path


def test_the_dry_run_prints_the_projection_of_the_runs_to_start_and_the_most(tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_ENV, "on")
    path = _sequential(tmp_path)
    dry = ablate_here("sweep", str(path), "--dry-run", "--workers", "2", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    head = re.search(r"projected wall time on this machine \(2 workers, cpu; 2 shapes probed in [\d.]+ s\):",
                     dry.stdout)
    first = re.search(r"  4 runs to start: (\d+) s.*\(run-seconds: training (\d+) s", dry.stdout)
    most = re.search(r"  8 runs at most: (\d+) s", dry.stdout)  # 2 rows x max_seeds 4
    assert head and first and most, dry.stdout
    assert int(most.group(1)) >= int(first.group(1)) > 0
    assert not (tmp_path / "sweeps").exists()  # the probe wrote nothing where the sweep would be
    quiet = ablate_here("sweep", str(path), "--dry-run", "--no-probe", cwd=tmp_path)
    assert quiet.returncode == 0 and "projected wall time" not in quiet.stdout


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("projected")
    path = sweep_file(tmp, "- {name: base}\n", name="p")
    path.write_text(path.read_text() + "parameters:\n  seed: {values: [0, 1]}\n")
    os.environ[PROBE_ENV] = "on"
    try:
        done = ablate_here("sweep", str(path), "--workers", "2", cwd=tmp)
    finally:
        os.environ[PROBE_ENV] = "off"
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp / "sweeps" / "p"


def test_the_launch_records_its_projection_beside_the_plan_and_nowhere_in_the_runs(launched):
    record = json.loads((launched / "projection.json").read_text())
    assert record["runs"] == len(plan_of(launched)["runs"]) == 2 and record["workers"] == 2
    assert record["most_runs"] is None and set(record["shapes"]) == {"base"}
    shape = record["shapes"]["base"]
    assert record["seconds"] == pytest.approx(sum(shape.values()))  # two runs alone on two workers: one's time
    assert record["launched_at"] <= min((launched / r["run_dir"] / "result.json").stat().st_mtime
                                        for r in plan_of(launched)["runs"])
    for run in plan_of(launched)["runs"]:
        assert not list((launched / run["run_dir"]).rglob("projection*"))


def test_the_report_sets_the_projection_against_the_runs_recorded_times(launched):
    report = ablate_here("report", str(launched), cwd=launched.parent.parent)
    assert report.returncode == 0, report.stderr
    record = json.loads((launched / "projection.json").read_text())
    results = [json.loads((launched / r["run_dir"] / "result.json").read_text()) for r in plan_of(launched)["runs"]]
    own = sum(r["wall_time_s"] for r in results)
    projected = 2 * sum(v for k, v in record["shapes"]["base"].items() if k != "evaluate")
    elapsed = max((launched / r["run_dir"] / "result.json").stat().st_mtime for r in plan_of(launched)["runs"]) \
        - record["launched_at"]
    text = " ".join(report.stdout.split())
    assert (f"cost: projected {duration(record['seconds'])} for the 2 runs to start on 2 workers (cpu); actual: 2 "
            f"runs ended, {duration(elapsed)} since the launch; their own time {own:.0f} s against {projected:.0f} s "
            f"projected for them ({own / projected:.2f}x), evaluate 0 s against 0 s.") in text
    assert "cost: projected" in (launched / "report" / "report.html").read_text()


def test_a_sweep_launched_without_a_probe_reports_no_cost(tmp_path):
    path = sweep_file(tmp_path, "- {name: base}\n", name="q")
    done = ablate_here("sweep", str(path), "--workers", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (tmp_path / "sweeps" / "q" / "projection.json").exists() and "cost:" not in done.stdout


def test_the_dry_run_packs_seed_arrays_as_one_job_each_and_probes_a_variant_once(tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_ENV, "on")
    probed = []
    monkeypatch.setattr(probe, "probe_run", lambda cfg, evaluate, **kw: (probed.append(cfg.seed),
                                                                          RunCost(train=10, other=2))[1])
    path = _sequential(tmp_path)
    alone = ablate_here("sweep", str(path), "--dry-run", "--workers", "1", "--fuse", "off", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    assert len(probed) == 2  # two variants, two seeds each: one probe a variant
    # four runs of 12 s in turn; then two later looks (max_seeds 4 - 2 seeds), each a seed of both variants
    assert "  4 runs to start: 48 s (run-seconds: training 40 s, validation 0 s, evaluate 0 s, " \
           "setup+checkpoints 8 s)" in alone.stdout
    assert "  8 runs at most: 96 s (run-seconds: training 80 s" in alone.stdout
    fused = ablate_here("sweep", str(path), "--dry-run", "--workers", "1", "--fuse", "on", cwd=tmp_path)
    assert "base: fused, 1 array of 2 seeds" in fused.stdout, fused.stdout
    assert "  4 runs to start: 44 s" in fused.stdout  # two arrays, each set up once: 2 + 2 x 10
    assert "  8 runs at most: 92 s" in fused.stdout
    def cores(n: int) -> None:  # what the pool's slots and the probe see
        monkeypatch.setattr(probe, "usable_cores", lambda: n)
        monkeypatch.setattr(slots, "usable_cores", lambda: n)
    cores(2)  # two workers, a core each
    two = ablate_here("sweep", str(path), "--dry-run", "--workers", "2", "--fuse", "off", cwd=tmp_path)
    assert "  4 runs to start: 24 s" in two.stdout and "  8 runs at most: 48 s" in two.stdout
    cores(1)  # two workers on one core: each run twice as long
    shared = ablate_here("sweep", str(path), "--dry-run", "--workers", "2", "--fuse", "off", cwd=tmp_path)
    assert "  4 runs to start: 48 s" in shared.stdout and "  8 runs at most: 96 s" in shared.stdout


def test_a_probe_that_fails_is_one_line_and_the_dry_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_ENV, "on")

    def fails(cfg, evaluate, **kw):
        raise RuntimeError("CUDA out of memory.\nmore")
    monkeypatch.setattr(probe, "probe_run", fails)
    dry = ablate_here("sweep", str(_sequential(tmp_path)), "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "no projected wall time: the probe failed (RuntimeError: CUDA out of memory.); --no-probe skips it" \
        in dry.stdout and "Traceback" not in dry.stderr


def test_a_projection_probed_on_busy_cores_says_so():
    cost = {"a": RunCost(train=5)}
    quiet, busy = (project([["a"]], cost, 1, load=load) for load in (0.9, 2.5))
    assert not any("shared" in line for line in projection_lines(quiet))
    assert projection_lines(busy)[-1] == ("  probed while the cores were shared (load average 2.5 a core): the runs "
                                          "take this long only if other work keeps them busy")


def test_workers_that_share_a_core_each_take_as_many_times_longer():
    p = project([["a"], ["a"]], {"a": RunCost(train=10, other=2)}, 2, shared=2.0)
    assert p.seconds == 24 and p.parts["train"] == 40 and p.shapes["a"] == {"train": 20, "validate": 0,
                                                                            "evaluate": 0, "other": 4}
    assert projection_lines(p)[-1] == ("  the workers' threads share the cores, 2 a core: each run's probed time is "
                                       "2x what it took alone (--workers fewer, or more cores)")
    assert project([["a"]], {"a": RunCost(train=10)}, 1, shared=0.5).seconds == 10  # spare cores speed nothing
