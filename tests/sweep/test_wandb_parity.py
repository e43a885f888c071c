"""Sweep files as W&B users write them: open-ended random and bayes, repeated draws, distributions inferred from
floats, drawn seeds, W&B's grid order under run_cap, hyperband's threshold, bayes scoring, and the plan as JSON.

The sweep files are written here in the styles of public W&B sweeps (not copied from any). What is expected of
them is worked out from W&B's rules as its engine (the ``sweeps`` package) states them: its grid is
``itertools.product`` over the parameter names sorted, its random search runs every draw, its schema infers
``int_uniform`` only from integers, its probabilities pass ``numpy.isclose(sum, 1)``, its hyperband threshold
is ``sorted(values)[int((1 / eta) * len(values))]``.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.errors import ConfigError
from ablate.sweep import load_sweep, plan_sweep
from ablate.sweep.hyperband import Hyperband
from ablate.sweep.params import Param
from ablate.sweep.plan import PlannedRun
from ablate.sweep.queue import run_score
from ablate.sweep.wandb_backend import to_wandb
from tests.conftest import REPO, TINY
from tests.sweep.conftest import ablate_here, plan_of, run_statuses

BASE = f"base: {{config: {REPO / 'configs/default.yaml'}, overrides: [train.max_steps=10]}}"


def _sweep(tmp_path: Path, text: str):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    return load_sweep(path)


def _ctrl_c_default() -> None:
    """In the child, before it runs ablate: SIGINT's default, as a terminal's foreground job has it. A suite launched in
    the background (``pytest &`` from a script) ignores SIGINT, every child inherits that, and a Ctrl-C sent to the
    sweep would then do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cli(*args: str, cwd: Path, background: bool = False):
    cmd = [sys.executable, "-m", "ablate.cli", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if background:  # a session of its own: Ctrl-C reaches the sweep and its runs, as from a terminal
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, preexec_fn=_ctrl_c_default)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


# --- distributions inferred as W&B infers them ------------------------------------------------------------------


def test_floats_written_as_floats_are_a_uniform_of_reals(tmp_path):
    """{min: 0.0, max: 1.0} on label smoothing: W&B's schema infers uniform (its int_uniform takes integers only),
    so the draws are reals, and the file sent to W&B says uniform."""
    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: random
        run_cap: 50
        parameters:
          train.label_smoothing: {{min: 0.0, max: 1.0}}
          model.n_layers: {{min: 1, max: 3}}
    """)
    smoothing, layers = sweep.parameters["train.label_smoothing"], sweep.parameters["model.n_layers"]
    assert (smoothing.distribution, layers.distribution) == ("uniform", "int_uniform")
    draws = [p.values["train.label_smoothing"] for p in sweep.points()]
    assert all(0.0 <= x <= 1.0 for x in draws) and len(set(draws)) == 50 and 1.0 not in draws
    assert {p.values["model.n_layers"] for p in sweep.points()} == {1, 2, 3}
    sent = to_wandb(sweep)["parameters"]
    assert sent["train.label_smoothing"] == {"distribution": "uniform", "min": 0.0, "max": 1.0}
    assert sent["model.n_layers"] == {"distribution": "int_uniform", "min": 1, "max": 3}


@pytest.mark.parametrize("probabilities", [[0.33333, 0.33333, 0.33333], [0.2, 0.3, 0.49999], [0.2, 0.3, 0.499],
                                           [0.2, 0.3, 0.51], [0.5, 0.5, 0.0]])
def test_probabilities_are_accepted_as_w_and_b_accepts_them(probabilities):
    """W&B's test is numpy.isclose(sum, 1): |sum - 1| <= 1e-8 + 1e-5 (its defaults), written out here."""
    accepted = abs(sum(probabilities) - 1.0) <= 1e-8 + 1e-5 * 1.0
    spec = {"values": ["a", "b", "c"], "probabilities": probabilities}
    if accepted:
        assert Param.parse("p", spec, "s").distribution == "categorical_w_probabilities"
    else:
        with pytest.raises(ConfigError, match="sum to 1"):
            Param.parse("p", spec, "s")


# --- every draw runs, repeats included --------------------------------------------------------------------------


def test_every_random_draw_runs_and_a_repeat_gets_a_fresh_seed(tmp_path):
    """W&B runs run_cap draws; with two values at 5% / 95%, most repeat. Each is a run: the same variant with the
    next seed it had not used (0, 1, 2, ... in plan order), never a dropped draw."""
    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: random
        run_cap: 20
        parameters:
          model.dropout: {{values: [0.0, 0.1], probabilities: [0.05, 0.95]}}
    """)
    runs = plan_sweep(sweep, tmp_path / "out")
    assert len(runs) == 20 and len({r.id for r in runs}) == 20
    for variant in {r.variant for r in runs}:
        seeds = [r.seed for r in runs if r.variant == variant]
        assert seeds == list(range(len(seeds)))  # the config's seed (0), then fresh ones in order
    assert sum(r.fresh_seed for r in runs) == 20 - len({r.variant for r in runs})
    many = _sweep(tmp_path, f"""
        {BASE}
        method: random
        run_cap: 2000
        parameters:
          model.dropout: {{values: [0.0, 0.1], probabilities: [0.05, 0.95]}}
    """).points()
    rare = sum(p.values["model.dropout"] == 0.0 for p in many)
    assert stats.binomtest(rare, 2000, 0.05).pvalue > 1e-3  # drawn at the stated probabilities, repeats counted


def test_a_seed_distribution_draws_a_seed_per_point_and_listed_seeds_are_replicates(tmp_path):
    drawn = _sweep(tmp_path, f"""
        {BASE}
        method: random
        run_cap: 6
        rows: [{{name: base}}, {{name: pre, model.norm_position: pre}}]
        parameters:
          seed: {{distribution: int_uniform, min: 0, max: 1000}}
    """)
    runs = plan_sweep(drawn, tmp_path / "a")
    assert len(runs) == 6 and all(0 <= r.seed <= 1000 for r in runs)
    assert sorted(r.seed for r in runs) != list(range(6)) and "seed" not in runs[0].varied
    assert {r.variant for r in runs} <= {"base", "pre"}  # the seed is not part of a variant's name
    assert not any("replicates" in n for n in drawn.notes())
    listed = _sweep(tmp_path, f"""
        {BASE}
        method: random
        run_cap: 6
        parameters:
          model.dropout: {{min: 0.0, max: 0.3}}
          seed: {{values: [0, 1, 2]}}
    """)
    runs = plan_sweep(listed, tmp_path / "b")
    assert [r.seed for r in runs] == [0, 1, 2, 0, 1, 2] and len({r.variant for r in runs}) == 2
    assert any("values are replicates" in n for n in listed.notes())
    with pytest.raises(ConfigError, match="a seed is an integer"):
        _sweep(tmp_path, "method: random\nrun_cap: 2\nparameters:\n  seed: {min: 0.0, max: 5.0}\n")


def test_a_grid_under_run_cap_takes_w_and_b_s_first_points(tmp_path):
    """W&B's grid is itertools.product over the parameter names in sorted order (the seed among them); run_cap
    takes the first points of that order, whatever order the file lists them in."""
    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: grid
        run_cap: 5
        parameters:
          train.label_smoothing: {{values: [0.0, 0.1]}}
          seed: {{values: [0, 1]}}
          model.dropout: {{values: [0.0, 0.2, 0.3]}}
    """)
    names = ["model.dropout", "seed", "train.label_smoothing"]
    values = {"model.dropout": [0.0, 0.2, 0.3], "seed": [0, 1], "train.label_smoothing": [0.0, 0.1]}
    expected = list(itertools.product(*(values[n] for n in names)))[:5]
    got = [(p.values["model.dropout"], p.seed, p.values["train.label_smoothing"]) for p in sweep.points()]
    assert got == expected
    assert list(sweep.points()[0].values) == ["train.label_smoothing", "model.dropout"]  # the file's order kept


# --- hyperband: W&B's threshold ---------------------------------------------------------------------------------


def _wandb_hyperband(config: dict, histories: dict[str, list[float]], running: list[str]) -> set[str]:
    """W&B's hyperband_stop_runs, restated from its engine's source (goal minimize)."""
    et = config
    if "max_iter" in et:
        band, bands = et["max_iter"], []
        for _ in range(et["s"]):
            band /= et["eta"]
            if band < 1:
                break
            bands.append(int(band))
        bands = sorted(bands)
    else:
        band, bands = et["min_iter"], []
        for _ in range(100):
            bands.append(int(band))
            band *= et["eta"]
    r = 1.0 / et["eta"]
    all_h = [h for h in histories.values() if h]
    thresholds = []
    for b in bands:
        vals = [h[b - 1] for h in all_h if len(h) >= b]
        thresholds.append(np.inf if not vals else sorted(vals)[int(r * len(vals))])
    stop = set()
    for run in running:
        h = histories[run]
        closest, threshold = -1, 0.0
        for b, t in zip(bands, thresholds):
            if b <= len(h):
                closest, threshold = b, t
            else:
                break
        if closest != -1:
            value = h[closest - 1] if et.get("strict") is True else min(h)
            if value > threshold:
                stop.add(run)
    return stop


@pytest.mark.parametrize("eta", [1.1, 1.3, 2.2, 3])
def test_hyperband_stops_exactly_what_w_and_b_stops(eta):
    """Synthetic metric streams (ties included, many runs at a band so that floor((1/eta) n) and floor(n/eta)
    part): every decision equals W&B's rule."""
    rng, decisions, differ = np.random.default_rng(int(eta * 10)), 0, 0
    for trial in range(150):
        config = ({"min_iter": 1} if trial % 2 else {"max_iter": 27, "s": 3}) | {"eta": eta, "strict": bool(trial % 3)}
        n = int(rng.integers(20, 140))
        histories = {f"r{i}": rng.integers(0, 30, size=int(rng.integers(1, 12))).astype(float).tolist()
                     for i in range(n)}
        running = [k for k in histories if rng.random() < 0.5]
        rule = Hyperband.parse({"type": "hyperband", **config}, "s")
        ours = set(rule.to_stop(histories, running, "minimize"))
        assert ours == _wandb_hyperband(config, histories, running), (trial, config)
        decisions += len(running)
        old = [sorted(v)[int(len(v) / eta)] for v in ([h[b - 1] for h in histories.values() if len(h) >= b]
                                                       for b in rule.bands) if v]
        differ += old != rule.thresholds(list(histories.values()))[: len(old)]
    assert decisions > 5000
    if eta != 3:
        assert differ > 0  # the streams reach the counts where floor(n / eta) would have judged differently


def test_strict_is_a_yaml_boolean():
    with pytest.raises(ConfigError, match=r"early_terminate.strict='false'.*YAML boolean"):
        Hyperband.parse({"type": "hyperband", "min_iter": 1, "strict": "false"}, "s")
    assert Hyperband.parse({"type": "hyperband", "min_iter": 1, "strict": False}, "s").strict is False


# --- keys W&B takes -----------------------------------------------------------------------------------------------


def test_w_and_b_s_metric_keys_normal_in_bayes_and_deprecated_forms(tmp_path):
    path = tmp_path / "bo.yaml"
    path.write_text(textwrap.dedent(f"""
        {BASE}
        method: bayes
        run_cap: 4
        metric: {{name: val/loss, goal: minimize, impute: best, impute_while_running: latest}}
        parameters:
          model.dropout: {{distribution: q_normal, mu: 0.1, sigma: 0.02, q: 0.01}}
          train.label_smoothing: {{distribution: log_uniform, min: -5, max: -1}}
    """))
    out = ablate_here("sweep", str(path), "--dry-run", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("ablate: warning:")]
    assert len(warnings) == 3, warnings
    assert "log_uniform is deprecated in W&B" in warnings[0] and "log_uniform_values" in warnings[0]
    assert "impute_while_running" in warnings[1]
    assert "method: bayes is searched here by Optuna's Gaussian process, not W&B's engine" in warnings[2]
    assert "a point scores the mean of its seeds' final values" in warnings[2]
    plan = json.loads(out.stdout)
    assert plan["metric"]["impute"] == "best" and plan["total_runs"] == 4 and not plan["open_ended"]
    assert 0.0 < plan["runs"][0]["varied"]["model.dropout"] < 0.3  # a normal distribution, searched
    with pytest.raises(ConfigError, match="metric.impute='median'"):
        _sweep(tmp_path, "method: bayes\nrun_cap: 2\nmetric: {name: val/loss, impute: median}\n"
                         "parameters:\n  model.dropout: {min: 0.0, max: 0.2}\n")


def test_a_bayes_dry_run_asks_for_one_point_and_shows_it_once_per_seed(tmp_path):
    path = tmp_path / "bo.yaml"
    path.write_text(textwrap.dedent(f"""
        {BASE}
        method: bayes
        run_cap: 6
        parameters:
          model.dropout: {{min: 0.0, max: 0.3}}
          seed: {{values: [0, 1, 2]}}
    """))
    plan = json.loads(ablate_here("sweep", str(path), "--dry-run", "--json", cwd=tmp_path).stdout)
    assert [r["seed"] for r in plan["runs"]] == [0, 1, 2]
    assert (len({r["varied"]["model.dropout"] for r in plan["runs"]}) == 1
            and len({r["variant"] for r in plan["runs"]}) == 1)


# --- open-ended sweeps --------------------------------------------------------------------------------------------


def _failures(sweep_dir: Path) -> dict[str, str]:
    """Each run's status and, for one that did not finish, the end of its log: what a failed assertion shows."""
    out = {}
    for run in plan_of(sweep_dir)["runs"]:
        folder = sweep_dir / run["run_dir"]
        result = json.loads((folder / "result.json").read_text()) if (folder / "result.json").is_file() else {}
        log = (folder / "train.log").read_text()[-600:] if (folder / "train.log").is_file() else ""
        status = result.get("status")
        out[run["id"]] = f"{status}: {result.get('error', '')} {log if status != 'finished' else ''}"
    return out


def _open_ended(tmp_path: Path, steps: int = 10) -> Path:
    overrides = ", ".join(TINY + [f"train.max_steps={steps}", f"train.val_every={max(5, steps // 4)}",
                                  "trainer.enable_progress_bar=false"])
    path = tmp_path / "open.yaml"
    path.write_text(textwrap.dedent(f"""
        name: open
        method: random
        base: {{config: {REPO / 'configs/default.yaml'}, overrides: [{overrides}]}}
        parameters:
          model.dropout: {{min: 0.0, max: 0.3}}
    """))
    return path


def test_an_open_ended_sweep_dry_runs_its_first_points(tmp_path):
    path = _open_ended(tmp_path)
    text = ablate_here("sweep", str(path), "--dry-run", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "open-ended" in text.stdout.splitlines()[0] and "--max-runs" in text.stdout.splitlines()[0]
    plan = json.loads(ablate_here("sweep", str(path), "--dry-run", "--json", cwd=tmp_path).stdout)
    assert plan["open_ended"] and plan["total_runs"] is None and len(plan["runs"]) == 10
    capped = json.loads(ablate_here("sweep", str(path), "--dry-run", "--json", "--max-runs", "3", cwd=tmp_path).stdout)
    assert not capped["open_ended"] and capped["total_runs"] == 3
    assert [r["id"] for r in capped["runs"]] == [r["id"] for r in plan["runs"][:3]]  # the same draws, capped
    bad = ablate_here("sweep", str(path), "--max-runs", "0", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--max-runs: '0'" in bad.stderr


def _early_run(sweep_dir: Path, before: int) -> bool:
    """A run is training and has not validated past step ``before`` (its progress file), so a signal now lands
    while it is in flight, not in its last steps."""
    for run, status in zip(plan_of(sweep_dir)["runs"], run_statuses(sweep_dir)):
        progress = sweep_dir / run["run_dir"] / "progress.json"
        try:
            step = json.loads(progress.read_text())["step"] if progress.is_file() else 0
        except (ValueError, KeyError):  # being written
            continue
        if status == "running" and step < before:
            return True
    return False


DEADLINE = 600.0  # a guard against a hung test only: each wait ends on its event


class _Sweep:
    """A sweep in the background, its stderr read line by line as it prints them (a thread per pipe, so neither fills
    and a wait for a line ends when the line comes, or at the deadline)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines, self._new = proc, [], queue.Queue()
        threading.Thread(target=self._read, args=(proc.stderr,), daemon=True).start()
        threading.Thread(target=proc.stdout.read, daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self._new.put(line)
        self._new.put(None)  # the sweep closed its stderr: it has ended

    def line(self, pattern: str) -> re.Match:
        """The first line from now on that matches ``pattern``."""
        end = time.monotonic() + DEADLINE
        while True:
            try:
                line = self._new.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line {pattern!r} in {DEADLINE:.0f} s: {''.join(self.lines)[-3000:]}")
            assert line is not None, f"the sweep ended before a line {pattern!r}: {''.join(self.lines)[-3000:]}"
            self.lines.append(line)
            if match := re.search(pattern, line):
                return match

    def until(self, what: str, ready) -> None:
        """Until ``ready()`` holds (a file the sweep's runs write); fail naming ``what`` if the sweep ends first."""
        end = time.monotonic() + DEADLINE
        while not ready():
            assert self.proc.poll() is None, f"the sweep ended before {what}: {''.join(self.lines)[-3000:]}"
            assert time.monotonic() < end, f"waited {DEADLINE:.0f} s for {what}"
            time.sleep(0.05)

    def ended(self) -> int:
        """Its exit code, once it has exited."""
        return self.proc.wait(timeout=DEADLINE)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_open_ended_sweep_stopped_by_ctrl_c_keeps_its_runs_and_resumes(tmp_path, stop):
    path = _open_ended(tmp_path, steps=120)  # long enough that a run in flight is still going when the signal lands
    sweep_dir = tmp_path / "sweeps" / "open"
    sweep = _Sweep(_cli("sweep", str(path), "--workers", "2", cwd=tmp_path, background=True))
    try:
        sweep.line(r"\bdone=3\b")  # three runs finished: the pool's progress line says so as the third ends
        sweep.until("a run training before step 60", lambda: _early_run(sweep_dir, before=60))  # one in flight
        if stop == signal.SIGINT:
            os.killpg(sweep.proc.pid, stop)  # Ctrl-C: the terminal signals the sweep and its runs
        else:
            os.kill(sweep.proc.pid, stop)  # a scheduler's SIGTERM: the sweep alone, which stops its runs
        assert sweep.ended() != 0
    finally:
        sweep.kill()  # a failed wait leaves no sweep behind
    plan = plan_of(sweep_dir)["runs"]
    results = {r["id"]: sweep_dir / r["run_dir"] / "result.json" for r in plan}  # a run drawn but not started has none
    finished = {i: path.read_bytes() for i, path in results.items()
                if path.is_file() and json.loads(path.read_text())["status"] == "finished"}
    assert len(finished) >= 3 and "failed" not in run_statuses(sweep_dir), _failures(sweep_dir)
    assert len(plan) > len(finished)  # runs were in flight when it was stopped
    total = len(plan) + 1
    again = _cli("sweep", str(path), "--workers", "2", "--max-runs", str(total), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = plan_of(sweep_dir)["runs"]
    assert [r["id"] for r in resumed[: len(plan)]] == [r["id"] for r in plan]  # the same draws, in order
    assert len(resumed) == total and run_statuses(sweep_dir) == ["finished"] * total
    assert {i: (sweep_dir / "runs" / i / "result.json").read_bytes() for i in finished} == finished  # not retrained


# --- what bayes learns from ---------------------------------------------------------------------------------------


def _run(sweep_dir: Path, name: str, status: str, history: list[float], final: float | None = None) -> PlannedRun:
    folder = sweep_dir / "runs" / name
    folder.mkdir(parents=True)
    result = {"status": status, **({"final": {"val/loss": final}} if final is not None else {})}
    (folder / "result.json").write_text(json.dumps(result))
    (folder / "progress.json").write_text(json.dumps({"history": {"val/loss": [[5 * (i + 1), v]
                                                                              for i, v in enumerate(history)]}}))
    return PlannedRun(id=name, variant=name, seed=0, varied={}, overrides=[], labels=[], run_dir=f"runs/{name}",
                      parameters=1, flops_per_token=1.0)


@pytest.mark.parametrize("impute,expected", [("worst", 9.0), ("best", 3.0), ("latest", 4.0)])
def test_bayes_scores_runs_as_w_and_b_does(tmp_path, impute, expected):
    """Finished: its final value; stopped by hyperband: the best value it logged; failed: metric.impute, where
    worst is the worst value any ended run logged (here 9.0, the stopped run's first)."""
    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: bayes
        run_cap: 4
        metric: {{name: val/loss, impute: {impute}}}
        parameters:
          model.dropout: {{min: 0.0, max: 0.3}}
    """)
    finished = _run(tmp_path, "a", "finished", [5.0, 2.5, 2.0], final=2.0)
    stopped = _run(tmp_path, "b", "stopped", [9.0, 6.0, 7.0])
    failed = _run(tmp_path, "c", "failed", [3.0, 4.0, float("nan")])
    silent = _run(tmp_path, "d", "failed", [])
    ended = [[5.0, 2.5, 2.0], [9.0, 6.0, 7.0], [3.0, 4.0]]
    assert run_score(sweep, tmp_path, finished, ended) == 2.0
    assert run_score(sweep, tmp_path, stopped, ended) == 6.0
    assert run_score(sweep, tmp_path, failed, ended) == expected
    assert run_score(sweep, tmp_path, silent, ended) == (9.0 if impute == "worst" else 0.0)  # W&B's 0 when none


@pytest.mark.slow
def test_bayes_beats_random_search_from_its_first_ten_points(tmp_path):
    """A quadratic bowl in (x, log y): with Optuna's default of 10 random start-up points, a 10-point bayes search
    is a random one (it won 13 of 30 against random search); starting the model after 2 it wins most."""
    from ablate.sweep.bayes import BayesSearch

    sweep = _sweep(tmp_path, """
        method: bayes
        run_cap: 10
        parameters:
          x: {distribution: uniform, min: -2.0, max: 2.0}
          y: {distribution: log_uniform_values, min: 0.001, max: 1.0}
    """)
    f = lambda v: (v["x"] - 0.7) ** 2 + (np.log10(v["y"]) + 2) ** 2  # noqa: E731
    wins = 0
    for seed in range(10):
        sweep.sampler_seed, scores = seed, []
        search = BayesSearch(sweep)
        for _ in range(10):
            number, u = search.ask()
            scores.append(f(search.point(u, None).values))
            search.tell(number, scores[-1])
        rng = random.Random(1000 + seed)
        wins += min(scores) < min(f({k: p.sample(rng) for k, p in sweep.searched.items()}) for _ in range(10))
    assert wins >= 8


def test_an_open_ended_sweep_on_ray_keeps_as_many_runs_in_flight_as_the_cluster_holds():
    from ablate.sweep.ray_backend import RayRunner

    class Cluster:  # what RayRunner asks of Ray here: its resources, and whether it is initialised
        def is_initialized(self):
            return False

        def cluster_resources(self):
            return {"CPU": 16.0}

    assert len(RayRunner(Cluster(), gpus_per_run=None, cpus_per_run=None).slots(None)) == 16
    assert len(RayRunner(Cluster(), gpus_per_run=None, cpus_per_run=4).slots(None)) == 4
    assert len(RayRunner(Cluster(), gpus_per_run=None, cpus_per_run=4).slots(3)) == 3  # a capped sweep: its runs


# --- files in the styles people write (written here; every W&B key as such a file would have it) ---------------

STYLES = {
    "lr_random_open": """
        program: train.py
        method: random
        metric: {name: val/loss, goal: minimize}
        parameters:
          train.lr: {distribution: log_uniform_values, min: 1.0e-5, max: 1.0e-2}
          model.dropout: {values: [0.0, 0.1, 0.2, 0.3]}
    """,
    "bayes_open_hyperband": """
        method: bayes
        metric: {name: val/loss, goal: minimize}
        early_terminate: {type: hyperband, min_iter: 3, eta: 2, strict: false}
        parameters:
          train.lr: {min: 0.0001, max: 0.01}
          train.label_smoothing: {min: 0.0, max: 0.2}
    """,
    "nested_grid": """
        method: grid
        metric: {name: val/acc, goal: maximize}
        parameters:
          model:
            parameters:
              n_layers: {values: [1, 2]}
              dropout: {value: 0.1}
          train:
            parameters:
              lr: {values: [0.001, 0.003]}
    """,
    "probabilities_and_seed": """
        method: random
        run_cap: 8
        metric: {name: val/loss, goal: minimize, impute: worst}
        parameters:
          model.ffn: {values: [relu, gelu, swiglu], probabilities: [0.2, 0.4, 0.4]}
          seed: {distribution: int_uniform, min: 0, max: 10000}
    """,
    "deprecated_log_uniform": """
        method: random
        run_cap: 4
        parameters:
          train.lr: {distribution: log_uniform, min: -9.2, max: -4.6}
          data.batch_size: {values: [32, 64]}
    """,
}


@pytest.mark.parametrize("name", list(STYLES))
def test_sweep_files_in_the_styles_people_write_dry_run_unchanged(tmp_path, name):
    """Learning rates under the default (noam) schedule, no run_cap, nested parameters, probabilities, a drawn
    seed, W&B's deprecated forms: each dry-runs as written (exit 0), its plan as JSON."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"{BASE}\n" + textwrap.dedent(STYLES[name]))
    out = ablate_here("sweep", str(path), "--dry-run", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["runs"] and len({r["id"] for r in plan["runs"]}) == len(plan["runs"])
    assert plan["open_ended"] == ("run_cap" not in STYLES[name] and "grid" not in STYLES[name])


def test_a_bayes_point_scores_the_mean_of_its_seeds(tmp_path):
    """ablate's own reading (README): a point runs once per listed seed, and the search learns their mean."""
    from ablate.sweep.queue import BayesQueue

    sweep = _sweep(tmp_path, f"""
        {BASE}
        method: bayes
        run_cap: 4
        parameters:
          model.dropout: {{min: 0.0, max: 0.3}}
          seed: {{values: [0, 1]}}
    """)
    runs = [_run(tmp_path, "s0", "finished", [3.0, 2.0], final=2.0), _run(tmp_path, "s1", "finished", [4.0], final=3.0)]
    queue = BayesQueue.__new__(BayesQueue)
    queue.sweep, queue.sweep_dir, queue.runs = sweep, tmp_path, runs
    assert queue._score(runs) == 2.5


def test_an_open_ended_sweep_ends_when_a_run_reaches_the_metric_target(tmp_path):
    path = _open_ended(tmp_path)
    path.write_text(path.read_text() + "metric: {name: val/loss, goal: minimize, target: 100.0}\n")
    done = ablate_here("sweep", str(path), "--workers", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    statuses = run_statuses(tmp_path / "sweeps" / "open")
    assert 1 <= statuses.count("finished") <= 3 and set(statuses) == {"finished"}  # the first runs reach it
