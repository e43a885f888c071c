"""Shared fixtures: the offline datasets beside the repo, tiny configs for fast tests, and tiny trained runs
shared by the tests of the commands that read a run back: a Multi30k translation run (``run_dir``) and a
Tiny Shakespeare language-model run (``lm_run_dir``)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from ablate.cli import main
from ablate.sweep.projection import PROBE_ENV

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ABLATE_SHARED_DATA", REPO.parent / "shared" / "data"))
# The suite launches hundreds of sweeps: none probes its runs' cost (ablate.sweep.projection) unless its test turns
# probing on (tests/sweep/test_projection.py). Set here, before any test, so the sweeps' child processes inherit it.
os.environ[PROBE_ENV] = "off"

# A model small enough that a forward and backward take milliseconds; W&B off unless a test is about it.
TINY = [
    "logger=none",
    "model.n_layers=2",
    "model.d_model=32",
    "model.n_heads=4",
    "model.d_ff=64",
    "data.vocab_size=24",
    "data.max_len=12",
]

# The tiny trained runs' settings (``run_dir``, ``lm_run_dir``).
SMALL = ["logger=none", "trainer.enable_progress_bar=false", "train.log_every=3", "model.n_layers=1",
         "model.d_model=32", "model.n_heads=4", "model.d_k=8", "model.d_v=8", "model.d_ff=64"]
TRANSLATION = SMALL + ["train.max_steps=12", "train.val_every=6", "train.schedule_args.warmup=6",
                       "data.limit_train=1000", "data.limit_val=40", "data.vocab_size=300", "data.max_tokens=1024",
                       "train.keep_checkpoints=2", "train.checkpoint_every=4"]
LM = SMALL + ["train.max_steps=6", "train.val_every=3", "train.schedule_args.warmup=3", "data.vocab_size=300",
              "data.max_len=32", "data.batch_size=8", "data.limit_train=64", "data.limit_val=8"]


def pytest_configure(config) -> None:
    """Under pytest-xdist (the README's ``-n auto``), each worker process is pinned to its own share of this
    process's cores and uses as many torch threads: two workers that each took every core would slow each other
    10-20x on a 2-core machine. The runs a test starts inherit the pin (a sweep splits the worker's share between its
    runs, :func:`ablate.train.threads.usable_cores`)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or not hasattr(os, "sched_setaffinity"):
        return
    cores, index, count = sorted(os.sched_getaffinity(0)), int(worker.removeprefix("gw")), int(count)
    mine = cores[index % len(cores)::count] if len(cores) >= count else [cores[index % len(cores)]]
    os.sched_setaffinity(0, mine)
    torch.set_num_threads(len(mine))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist's ``--dist loadgroup`` (the README's test command), the tests of a module that share a
    module-scoped fixture (a sweep trained once for the module) run in one worker, so that it is made once; every
    other test goes to whichever worker is free. A module that names its group itself keeps it (the Slurm test
    modules share one, so that one worker runs them in turn rather than a second waiting for the first's cluster).
    The tests marked ``slow`` (and their groups) are handed out first."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if item.get_closest_marker("xdist_group") is None and any(
                d.scope == "module" for fixturedefs in defs for d in fixturedefs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the longest first, so that no worker ends the suite alone on one
        slow = {_group(item) for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: _group(item) not in slow)  # stable: a group stays whole and in order


def _group(item) -> str:
    """The xdist group an item is scheduled with: its ``xdist_group`` mark, else itself."""
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0]) if mark and mark.args else item.nodeid


def assert_same_values(a, b, where: str) -> None:
    """``a`` and ``b`` (JSON-like: dicts, lists, numbers, strings) hold the same keys and values, floats to fp32
    tolerance (two NaNs agree): what two processes that train the same run record. ``where`` names the first that
    differs."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), (where, sorted(a), sorted(b))
        for key in a:
            assert_same_values(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_values(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6), (where, a, b)
    else:
        assert a == b, (where, a, b)


def result_of(run_dir: Path) -> dict:
    """A run's result.json as it lies on disk (read here, not through ablate.runs.files: the tests check the format)."""
    return json.loads((Path(run_dir) / "result.json").read_text())


@dataclass(frozen=True)
class Ran:
    """What ``ablate ARGS`` returned and printed, as :func:`subprocess.run` would give it."""

    returncode: int
    stdout: str
    stderr: str


def ablate_here(*args: str, cwd: Path) -> Ran:
    """``ablate ARGS`` in this process (:func:`ablate.cli.main`, what the console script calls) from ``cwd``, its
    output captured: for commands that kill nothing and register nothing (a user's ``--import`` stays in a child
    process, which keeps this session's registry clean). Any fixture scope may call it (it needs no capsys)."""
    out, err, before = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(before)
    return Ran(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (Multi30k, Tiny Shakespeare); skips the test when it is not there."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline datasets not found at {SHARED_DATA} (set ABLATE_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def run_dir(shared_data, tmp_path_factory) -> Path:
    """A finished tiny translation run: val/bleu logged at each validation, the last 2 step checkpoints (4 apart)
    kept."""
    import ablate
    from ablate.train.run import train

    tmp = tmp_path_factory.mktemp("translation-run")
    cfg = ablate.load_config(REPO / "configs/multi30k.yaml", TRANSLATION + [
        f"data.path={shared_data / 'multi30k'}", f"data.cache_dir={tmp / 'cache'}", f"output_dir={tmp / 'run'}"])
    return train(cfg)


@pytest.fixture(scope="session")
def lm_run_dir(shared_data, tmp_path_factory) -> Path:
    """A finished tiny decoder-only run on Tiny Shakespeare."""
    import ablate
    from ablate.train.run import train

    tmp = tmp_path_factory.mktemp("lm-run")
    cfg = ablate.load_config(REPO / "configs/tinyshakespeare.yaml", LM + [
        f"data.path={shared_data / 'tinyshakespeare' / 'input.txt'}", f"data.cache_dir={tmp / 'cache'}",
        f"output_dir={tmp / 'run'}"])
    return train(cfg)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    """Run the test inside a fresh temporary folder (run directories land there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def padded_masks(T: int) -> dict[str, torch.Tensor]:
    """Masks of a batch of two whose row 1 ends in two padding positions: the decoder's (causal and key padding)
    and the encoder's (key padding only). (B, 1, T|1, T), True = may attend."""
    padding = torch.ones(2, 1, 1, T, dtype=torch.bool)
    padding[1, ..., T - 2 :] = False
    return {"decoder": padding & torch.ones(T, T, dtype=torch.bool).tril(), "encoder": padding}


@functools.lru_cache(maxsize=None)
def refusal(kind: str, name: str, arch: str) -> Exception | None:
    """The one-line refusal of a variant that cannot serve this architecture (``sharing=encoder`` in a decoder-only
    model, which has no encoder): a ConfigError naming the variant's key and the architecture; None when it builds.
    Any other error is raised. Built once per combination, on the meta device."""
    import ablate
    from ablate.errors import ConfigError
    from ablate.model.meta import build_on_meta

    try:
        build_on_meta(ablate.load_config(None, TINY + [f"model.{kind}={name}", f"model.arch={arch}"]))
    except ConfigError as e:
        if f"model.arch={arch}" in str(e) and e.key == f"model.{kind}":
            return e
        raise
    return None


def skip_if_refused(kind: str, name: str, arch: str) -> None:
    """Skip a generated test for a variant that refuses this architecture (:func:`refusal`);
    ``test_every_variant`` checks which variants refuse which."""
    if (e := refusal(kind, name, arch)) is not None:
        pytest.skip(f"refused: {e}")
