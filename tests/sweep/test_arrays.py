"""A sweep's seed arrays: which runs fuse, how many members an array takes, and a fused sweep end to end (each
member an ordinary run to the report, a failing member failing alone)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from ablate.cli import main
from ablate.config import load_config
from ablate.runs.files import read_result
from ablate.sweep.arrays import MAX_MEMBERS, fusing
from ablate.sweep.queue import RunQueue
from tests.conftest import REPO
from tests.sweep.conftest import plan_of, run_statuses, sweep_file


@dataclass
class FakeGpu:
    index: int
    free: int


def _cfg(*overrides: str):
    return load_config(REPO / "configs/default.yaml", list(overrides))


def test_off_and_numbers_bound_the_members():
    assert fusing("off", gpus=[]).members == 1 and fusing("off", gpus=[]).members_for(_cfg(), True) == 1
    assert fusing("3", gpus=[]).members_for(_cfg(), True) == 3
    assert fusing(str(MAX_MEMBERS + 5), gpus=[]).members == MAX_MEMBERS
    with pytest.raises(ValueError, match="--fuse"):
        fusing("sometimes", gpus=[])


def test_auto_fuses_on_a_gpu_as_many_as_its_share_holds_and_not_on_a_cpu():
    cpu = fusing("auto", gpus=[])
    assert cpu.members == 1 and "CPU" in cpu.why
    gib = 1 << 30
    gpu = fusing("auto", gpus=[FakeGpu(0, 10 * gib)], slots_per_gpu=2, run_bytes=gib)
    assert gpu.members == 5  # 10 GiB free, two runs share the GPU: 5 GiB each, 1 GiB a member
    assert fusing("auto", gpus=[FakeGpu(0, 100 * gib)], run_bytes=gib).members == MAX_MEMBERS
    assert fusing("auto", gpus=[FakeGpu(0, gib // 2)], run_bytes=gib).members == 1  # none fits: alone


def test_a_gpu_is_filled_by_default():
    """Auto on a GPU: two processes, each an array as large as half the free memory holds; solo packing when the
    seeds do not fuse (--fuse off) or on a CPU."""
    from ablate.sweep.arrays import ARRAYS_PER_GPU, processes_per_gpu
    from ablate.sweep.slots import slots

    gib, gpus = 1 << 30, [FakeGpu(0, 40 << 30)]
    per_gpu = processes_per_gpu("auto", "auto", gpus)
    where = slots(workers=1, runs_per_gpu=per_gpu, gpus=gpus, run_bytes=None)
    assert len(where) == ARRAYS_PER_GPU == 2
    assert fusing("auto", gpus=gpus, slots_per_gpu=len(where), run_bytes=2 * gib).members == 10
    assert processes_per_gpu("auto", "off", gpus) == "auto"  # solo runs: as many as fit (ablate.sweep.slots)
    assert processes_per_gpu("auto", "auto", []) == "auto" and processes_per_gpu("3", "auto", gpus) == "3"


def test_a_run_says_whether_it_fuses():
    pool = fusing("auto", gpus=[])  # alone unless a run asks
    assert pool.members_for(_cfg("trainer.fuse=true"), True) == MAX_MEMBERS
    assert pool.members_for(_cfg("trainer.fuse=true"), False) == 1  # its variant does not fuse
    assert fusing("on", gpus=[]).members_for(_cfg("trainer.fuse=false"), True) == 1
    assert fusing("on", gpus=[]).members_for(_cfg(), True) == MAX_MEMBERS


@dataclass
class Run:
    id: str
    variant: str


def test_the_queue_hands_over_waiting_seeds_of_the_same_variant():
    runs = [Run(f"{v}{s}", v) for s in range(3) for v in "ab"]
    queue = RunQueue.__new__(RunQueue)
    queue.todo, queue.closed = deque(runs), None
    first = queue.next()
    taken = queue.take(lambda r: r.variant == first.variant, 5)
    assert [r.id for r in taken] == ["a1", "a2"]
    assert [r.id for r in queue.todo] == ["b0", "b1", "b2"]
    assert [r.id for r in queue.take(lambda r: r.variant == "b", 1)] == ["b0"]  # at most ``most``


def test_a_fused_sweep_is_a_sweep_of_ordinary_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: wide, model.d_ff: 96}
    """)
    path.write_text(path.read_text() + "parameters:\n  seed: {values: [0, 1, 2]}\n")
    assert main(["sweep", str(path), "--dry-run", "--fuse", "on"]) == 0
    assert "base: fused, 1 array of 3 seeds" in capsys.readouterr().out
    assert main(["sweep", str(path), "--fuse", "on", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    sweep_dir = tmp_path / "sweeps" / "t"
    assert run_statuses(sweep_dir) == ["finished"] * 6
    arrays = {}
    for run in plan_of(sweep_dir)["runs"]:
        result = read_result(sweep_dir / run["run_dir"])
        assert result["fused"]["members"] == 3
        arrays.setdefault(result["fused"]["array"], set()).add(run["variant"])
    assert sorted(map(sorted, arrays.values())) == [["base"], ["wide"]]  # one array per variant
    assert "3/3" in out and "wide" in out  # the report counts every member as a run
    assert "seed arrays: 6 of 6 runs trained fused, in 2 arrays" in " ".join(out.split())
    assert main(["sweep", str(path), "--fuse", "on", "--workers", "1"]) == 0  # relaunched: nothing to train
    assert len(list((sweep_dir / "arrays").glob("*.log"))) == 2


def test_fuse_refuses_what_it_cannot_read(tmp_path, capsys):
    path = sweep_file(tmp_path, "- {name: base}")
    assert main(["sweep", str(path), "--fuse", "0", "--dry-run"]) == 2
    assert "--fuse" in capsys.readouterr().err
    assert not (tmp_path / "sweeps").exists()
    assert not Path("sweeps/t").exists()


def test_a_sequential_sweep_adds_seeds_after_its_arrays(tmp_path, monkeypatch, capsys):
    """The first look's seeds train as arrays; the look still waits for every member, then adds the next seed to the
    rows left undecided (a margin no interval can fit keeps every row undecided up to max_seeds)."""
    monkeypatch.chdir(tmp_path)
    path = sweep_file(tmp_path, """
        - {name: base}
        - {name: wide, model.d_ff: 96}
    """)
    path.write_text(path.read_text() + "parameters:\n  seed: {values: [0, 1, 2]}\n"
                    "decide: {max_seeds: 4, margin: 0.000001}\n")
    assert main(["sweep", str(path), "--fuse", "on", "--workers", "1"]) == 0
    sweep_dir = tmp_path / "sweeps" / "t"
    runs = plan_of(sweep_dir)["runs"]
    assert run_statuses(sweep_dir) == ["finished"] * 8 and sorted({r["seed"] for r in runs}) == [0, 1, 2, 3]
    members = {r["seed"]: read_result(sweep_dir / r["run_dir"]).get("fused", {}).get("members") for r in runs}
    assert members[0] == members[2] == 3 and members[3] is None  # the added seed: one a variant, alone


def test_seeds_are_shared_out_over_the_pool():
    """Ten seeds of one variant and two workers: two arrays of five, not one of ten beside an idle worker; with
    many variants waiting, each array takes all of its variant's seeds."""
    from ablate.sweep.arrays import plan_groups

    texts = {}
    for v, d_ff in (("a", 64), ("b", 96)):
        for s in range(10):
            texts[f"{v}{s}"] = _cfg(f"seed={s}", f"model.d_ff={d_ff}", f"output_dir=r/{v}{s}")
    rule = fusing("on", gpus=[])
    groups = plan_groups([Run(f"a{s}", "a") for s in range(10)], lambda r: texts[r.id], rule, n_slots=2)
    assert [len(g) for g in groups] == [5, 5]
    groups = plan_groups([Run(f"{v}{s}", v) for v in "ab" for s in range(3)], lambda r: texts[r.id], rule, n_slots=2)
    assert [[r.id for r in g] for g in groups] == [["a0", "a1", "a2"], ["b0", "b1", "b2"]]


def test_a_recorded_grouping_is_kept_whatever_waits(tmp_path):
    """The first call records every waiting run's array; a later queue (a relaunch, with other slots and fewer runs
    waiting) gets the recorded arrays, the members that ended before included, and only the waiting ones taken."""
    from ablate.sweep.arrays import ARRAYS_FILE, seed_arrays

    texts = {f"a{s}": _cfg(f"seed={s}", f"output_dir=r/a{s}") for s in range(6)}
    runs = [Run(f"a{s}", "a") for s in range(6)]

    def queue_of(todo):
        queue = RunQueue.__new__(RunQueue)
        queue.todo, queue.runs, queue.closed = deque(todo), runs, None
        return queue

    queue = queue_of(runs)
    members = seed_arrays(queue, lambda r: texts[r.id], fusing("on", gpus=[]), 2, tmp_path)
    array, taken = members(queue.next())
    assert [r.id for r in array] == [r.id for r in taken] == ["a0", "a1", "a2"]
    assert (tmp_path / ARRAYS_FILE).is_file()
    queue = queue_of([r for r in runs if r.id != "a1"])  # a1 ended before the kill; three slots now
    members = seed_arrays(queue, lambda r: texts[r.id], fusing("on", gpus=[]), 3, tmp_path)
    array, taken = members(queue.next())
    assert [r.id for r in array] == ["a0", "a1", "a2"] and [r.id for r in taken] == ["a0", "a2"]
    assert [r.id for r in members(queue.next())[0]] == ["a3", "a4", "a5"] and not queue.todo


@pytest.mark.parametrize("text", ['{"arrays": [["a", 1]]}', '{"arrays": [[]]}', '["a"]', '{"arrays": [["a"'])
def test_a_damaged_record_of_the_arrays_is_refused_naming_it(tmp_path, text):
    from ablate.errors import ConfigError
    from ablate.sweep.arrays import ARRAYS_FILE, read_groups

    (tmp_path / ARRAYS_FILE).write_text(text)
    with pytest.raises(ConfigError, match=ARRAYS_FILE):
        read_groups(tmp_path)
