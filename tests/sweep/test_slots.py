"""Where the local pool's runs train: CPU workers with a share of the cores each, or K runs on every GPU
(``--runs-per-gpu K``, or ``auto`` from the run's estimated memory), checked with fake device lists."""

from __future__ import annotations

import inspect
import json
import threading
from collections import Counter, defaultdict

import pytest

from ablate.sweep import load_sweep
from ablate.sweep.launch import launch
from ablate.sweep.slots import AUTO, MAX_PER_GPU, RUNS_PER_GPU, Gpu, slots
from tests.sweep.conftest import sweep_file

GiB = 1 << 30


def _devices(envs: list[dict[str, str]]) -> list[str]:
    return [e["CUDA_VISIBLE_DEVICES"] for e in envs]


def _threads(envs: list[dict[str, str]]) -> set[str]:
    return {e["OMP_NUM_THREADS"] for e in envs} | {e["MKL_NUM_THREADS"] for e in envs}


def test_cpu_workers_see_no_gpu_and_split_the_cores():
    envs = slots(workers=3, gpus=[], cores=6)
    assert _devices(envs) == ["", "", ""] and _threads(envs) == {"2"}


def test_more_workers_than_cores_still_get_one_thread_each():
    assert _threads(slots(workers=4, gpus=[], cores=2)) == {"1"}


def test_runs_per_gpu_puts_k_runs_on_every_gpu():
    envs = slots(workers=1, runs_per_gpu=3, gpus=[Gpu(0, 80 * GiB), Gpu(1, 80 * GiB)], cores=12)
    assert Counter(_devices(envs)) == {"0": 3, "1": 3}
    assert _threads(envs) == {"2"}  # 12 cores over 6 runs
    assert _devices(slots(workers=4, gpus=[Gpu(0, GiB), Gpu(1, GiB)], cores=2)) == ["0", "1"]  # default: one per GPU


@pytest.mark.parametrize("free, need, k", [
    (80 * GiB, 9 * GiB, 8),  # as many as fit: floor(80 / 9)
    (10 * GiB, 9 * GiB, 1),
    (4 * GiB, 9 * GiB, 1),  # too little free memory still runs one (it may fail with out of memory, as alone)
    (80 * GiB, GiB // 4, MAX_PER_GPU),  # never more than the cap, however small the run
])
def test_auto_fits_the_runs_in_each_gpus_free_memory(free, need, k):
    envs = slots(workers=1, runs_per_gpu="auto", gpus=[Gpu(0, free), Gpu(1, 2 * free)], run_bytes=need, cores=64)
    counts = Counter(_devices(envs))
    assert counts["0"] == k and counts["1"] == min(MAX_PER_GPU, max(1, 2 * free // need))


def test_auto_without_an_estimate_runs_one_per_gpu():
    assert _devices(slots(workers=1, runs_per_gpu="auto", gpus=[Gpu(0, 80 * GiB)], run_bytes=None)) == ["0"]


def test_a_packed_sweep_trains_k_runs_at_once_on_each_gpu_and_pins_each_run(tmp_path, monkeypatch):
    """The pool with two fake GPUs and --runs-per-gpu 2: every run is given one device, and four runs hold the devices
    at once (a barrier of four lets a round through only when all four slots are busy), never more than two each."""
    import ablate.sweep.runner as runner
    import ablate.sweep.slots as machine

    lock, holding, most, seen = threading.Lock(), Counter(), Counter(), []
    together = threading.Barrier(4, timeout=300)  # broken (the test fails) unless four runs train at once

    def fake_job(job, sweep_dir, *, env, children, cwd=None, fresh=False):
        (run,) = job.runs
        device = env["CUDA_VISIBLE_DEVICES"]
        with lock:
            holding[device] += 1
            most[device] = max(most[device], holding[device])
            seen.append((run.id, device, env["OMP_NUM_THREADS"]))
        together.wait()
        (sweep_dir / run.run_dir).mkdir(parents=True, exist_ok=True)
        (sweep_dir / run.run_dir / "result.json").write_text(json.dumps({"status": "finished"}))
        with lock:
            holding[device] -= 1
        return [(0, "")]

    monkeypatch.setattr(machine, "visible_gpus", lambda: [Gpu(0, 80 * GiB), Gpu(1, 80 * GiB)])
    monkeypatch.setattr(runner, "run_job", fake_job)
    monkeypatch.setattr(machine, "usable_cores", lambda: 8)
    rows = "\n".join(f"- {{name: r{i}, seed: {i}}}" for i in range(8))
    sweep = load_sweep(sweep_file(tmp_path, rows))
    # fuse off: runs one per process (eight seeds of one config would otherwise train as seed arrays on the GPUs)
    _, runs, outcome = launch(sweep, extra=[], sweep_dir=tmp_path / "s", workers=1, dry_run=False, retry_failed=False,
                              progress=False, runs_per_gpu=2, fuse="off")
    assert len(outcome.done) == len(runs) == 8 and not outcome.failed
    assert sorted(r for r, _, _ in seen) == sorted(r.id for r in runs)  # each run trained once
    assert {d for _, d, _ in seen} == {"0", "1"} and {t for _, _, t in seen} == {"2"}  # 8 cores over 4 slots
    assert most == {"0": 2, "1": 2}


def test_a_launch_packs_gpus_as_ablate_sweep_does_without_runs_per_gpu():
    """launch() called without runs_per_gpu (a script, a test) packs each GPU as the command line does without
    --runs-per-gpu: auto."""
    from ablate.cli.parser import build_parser

    _, subparsers = build_parser(defaultdict(lambda: None))
    command_line = subparsers["sweep"].parse_intermixed_args(["sweep.yaml"]).runs_per_gpu
    assert inspect.signature(launch).parameters["runs_per_gpu"].default == command_line == RUNS_PER_GPU == AUTO
