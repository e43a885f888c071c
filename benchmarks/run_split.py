"""Where a quickstart run's wall time goes: start-up, data, training steps, validation, checkpoints, W&B, logging and
callbacks, tear-down, beside the compute floor (the bare training step alone).

One run of the quickstart (configs/default.yaml with experiments/quickstart.yaml's overrides: 500 steps, a validation
every 100; W&B offline, real files; one thread) as a sweep worker runs it: ``ablate train <run_dir>/config.yaml`` in a
process forked from one that has imported what ``ablate.sweep.warm`` preloads (``--fresh``: a fresh interpreter, as
with ``ABLATE_WARM=0``, which adds the imports to the start-up). Inside ``fit`` the split is Lightning's own
``SimpleProfiler`` (``trainer.extra.profiler=simple``: data = the datamodule's setup and the training batches'
fetches, steps = ``run_training_batch``, checkpoints = ModelCheckpoint's hooks); outside it, and for validation as a
whole and W&B, perf_counter stamps around wandb.init / logging / finish and the fit's hooks. Logging and callbacks is
what is left of ``fit``; the progress bar's share is shown apart.

The compute floor: ``_common.train_step`` (ablate's model, projected loss, fused Adam) on the same task's batches at
the run's precision, ms per step x the run's steps; and x runs / workers for a quickstart of ``--runs`` runs on
``--workers`` one-thread workers.

``--baseline DIR`` also runs the same split with the ablate of another checkout (``git worktree add DIR <commit>``)
on its ``PYTHONPATH``, interleaved with this one, each in its own process: the before/after of a change, in one
invocation on the same machine.

    python benchmarks/run_split.py [--quick] [--rounds 1] [--fresh] [--baseline DIR] [--runs 31] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

QUICKSTART = ["train.max_steps=500", "train.val_every=100"]  # experiments/quickstart.yaml's base overrides
QUICK = ["train.max_steps=60", "train.val_every=20"]
PARTS = ["start-up", "data", "training steps", "validation", "checkpoints", "W&B", "logging/callbacks", "tear-down"]
CHILD_PREFIX = "RUN_SPLIT "


def _add_args(parser) -> None:
    parser.add_argument("--rounds", type=int, default=1, help="runs per contender (interleaved)")
    parser.add_argument("--fresh", action="store_true", help="a fresh interpreter per run instead of a warm fork")
    parser.add_argument("--baseline", default=None, help="another checkout whose ablate runs the same split")
    parser.add_argument("--runs", type=int, default=31, help="the quickstart's runs, for the floor (31: 2026-11-25)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # internal: one measuring process
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: a fresh run process


# ---- in the measuring process (one per contender): fork a run as the warm server does, and time its parts ----

class Stamps:
    """perf_counter stamps and durations a run's instrumentation collects; written as JSON by the run."""

    def __init__(self):
        self.t: dict[str, float] = {}
        self.spent: dict[str, float] = {}
        self.inner: list[float] = []  # per timed call in progress: the time of the timed calls inside it

    def add(self, key: str, seconds: float) -> None:
        self.spent[key] = self.spent.get(key, 0.0) + seconds


def _timed(owner, name: str, stamps: Stamps, key: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its own wall time to ``stamps.spent[key]`` (without the timed calls
    it makes: WandbLogger.log_hyperparams starts the run, wandb.init, on first use)."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        stamps.inner.append(0.0)
        try:
            return inner(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - t0
            stamps.add(key, elapsed - stamps.inner.pop())
            if stamps.inner:
                stamps.inner[-1] += elapsed

    setattr(owner, name, wrapper)


def _instrument(stamps: Stamps) -> list:
    """Patch the run's code paths to stamp them; returns a list that receives the Trainer once made."""
    import pytorch_lightning as pl
    import wandb
    from pytorch_lightning.loggers import CSVLogger, WandbLogger
    from wandb.sdk import wandb_run

    import ablate.train.run as run

    trainers: list = []

    class Hooks(pl.Callback):
        def on_fit_start(self, trainer, pl_module):
            stamps.t.setdefault("fit_start", time.perf_counter())

        def on_validation_start(self, trainer, pl_module):
            stamps.t["val_start"] = time.perf_counter()

        def on_validation_end(self, trainer, pl_module):  # before ModelCheckpoint's: Lightning puts those last
            stamps.add("validation", time.perf_counter() - stamps.t["val_start"])

        def on_fit_end(self, trainer, pl_module):
            stamps.t["fit_end"] = time.perf_counter()

    make_trainer = run.make_trainer

    def make(*args, **kwargs):
        stamps.t["make_trainer"] = time.perf_counter()
        trainer = make_trainer(*args, **kwargs)
        trainer.callbacks.insert(0, Hooks())
        trainers.append(trainer)
        return trainer

    run.make_trainer = make
    _timed(wandb, "init", stamps, "wandb_init")
    _timed(wandb_run.Run, "finish", stamps, "wandb_finish")
    _timed(WandbLogger, "log_metrics", stamps, "wandb_log")
    _timed(WandbLogger, "log_hyperparams", stamps, "wandb_hyperparams")
    _timed(CSVLogger, "log_metrics", stamps, "csv_log")
    return trainers


def _profiled(trainer) -> dict[str, float]:
    """The SimpleProfiler's totals by part (seconds)."""
    totals = {k: sum(v) for k, v in trainer.profiler.recorded_durations.items()}

    def of(test) -> float:
        return sum(v for k, v in totals.items() if test(k))

    return {"steps": totals.get("run_training_batch", 0.0),
            "fetch": totals.get("[_TrainingEpochLoop].train_dataloader_next", 0.0),
            "setup": of(lambda k: k.startswith("[LightningDataModule]")),
            "checkpoints": of(lambda k: k.startswith("[Callback]ModelCheckpoint")),
            "progress_bar": of(lambda k: k.startswith(f"[Callback]{type(trainer.progress_bar_callback).__name__}."))}


def _run_child(config: str, log: str, out: str, start: float) -> None:
    """In the forked (or fresh) run process: ``ablate train config`` as ``ablate.sweep.warm._child`` runs it, with
    its parts stamped into ``out``; ``start``: when the process was asked for (perf_counter is system-wide)."""
    import atexit

    import torch

    torch.set_num_threads(1)
    stamps = Stamps()
    trainers = _instrument(stamps)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from ablate.entry import main

    code = main(["train", config])
    stamps.t["main_done"] = time.perf_counter()
    sys.stdout.flush()
    atexit._run_exitfuncs()  # wandb's service shut-down among them, as the warm worker runs them
    end = time.perf_counter()
    t, s = stamps.t, stamps.spent
    p = _profiled(trainers[0])
    fit = t["fit_end"] - t["fit_start"]  # Lightning sets the datamodule up before on_fit_start: in start-up's window
    split = {
        "start-up": t["fit_start"] - start - s.get("wandb_init", 0.0) - s.get("wandb_hyperparams", 0.0) - p["setup"],
        "data": p["setup"] + p["fetch"],
        "training steps": p["steps"],
        "validation": s.get("validation", 0.0),
        "checkpoints": p["checkpoints"],
        "W&B": sum(s.get(k, 0.0) for k in ("wandb_init", "wandb_hyperparams", "wandb_log", "wandb_finish")),
        "logging/callbacks": fit - p["fetch"] - p["steps"] - s.get("validation", 0.0) - p["checkpoints"]
        - s.get("wandb_log", 0.0),
        "tear-down": end - t["fit_end"] - s.get("wandb_finish", 0.0),
    }
    Path(out).write_text(json.dumps({"exit": code, "total": end - start, "split": split, "fit": fit,
                                     "progress_bar": p["progress_bar"], "csv_log": s.get("csv_log", 0.0),
                                     "wandb": {k: v for k, v in s.items() if k.startswith("wandb")}}))


# ---- the measuring process: a warm parent that forks the run (or starts a fresh interpreter) ----

def _measure(config_overrides: list[str], fresh: bool) -> dict:
    """One run in a new run directory, its parts from the run process; printed as one ``RUN_SPLIT {...}`` line."""
    import importlib
    import multiprocessing

    from omegaconf import OmegaConf

    import ablate
    from ablate.sweep import warm

    for module in warm.PRELOAD:  # what the warm server has imported before it forks a run
        importlib.import_module(module)
    work = Path(tempfile.mkdtemp(prefix="run_split-"))
    cfg = ablate.load_config(C.REPO / "configs/default.yaml", [*config_overrides, f"output_dir={work / 'run'}",
                                                                  "trainer.threads=1", "trainer.extra.profiler=simple"])
    config, log, out = work / "config.yaml", work / "train.log", work / "split.json"
    OmegaConf.save(cfg, config)
    os.environ.update(WANDB_MODE="offline", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    t0 = time.perf_counter()
    if fresh:
        subprocess.run([sys.executable, __file__, "--child", json.dumps([str(config), str(log), str(out), t0])],
                       check=True)
    else:
        process = multiprocessing.get_context("fork").Process(target=_forked, args=(str(config), str(log), str(out)))
        process.start()
        process.join()
    wall = time.perf_counter() - t0
    measured = json.loads(out.read_text())
    result = json.loads((work / "run" / "result.json").read_text())
    measured.update(wall=wall, precision=result["precision"], status=result["status"], steps=result["step"],
                    work=str(work), ablate=str(Path(ablate.__file__).parent.parent))
    print(CHILD_PREFIX + json.dumps(measured), flush=True)
    return measured


def _forked(config: str, log: str, out: str) -> None:
    from ablate.sweep import warm

    start = time.perf_counter()
    if hasattr(warm, "settle"):  # what ablate.sweep.warm._child does first
        warm.settle({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    else:  # a baseline from before warm.settle (2026-11-26)
        from ablate.runtime import tune_glibc_malloc

        tune_glibc_malloc()
    _run_child(config, log, out, start)
    os._exit(0)


# ---- the orchestrator: contenders interleaved, each measurement in its own process; the floor; the table ----

def _measured_by(checkout: Path, overrides: list[str], fresh: bool) -> dict:
    """A measuring process running ``checkout``'s ablate (on PYTHONPATH); its ``RUN_SPLIT`` line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, __file__, "--measure", json.dumps([overrides, fresh])], env=env,
                          capture_output=True, text=True, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith(CHILD_PREFIX)), None)
    if line is None:
        raise RuntimeError(f"the measuring process with {checkout} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return json.loads(line[len(CHILD_PREFIX):])


def bare_ms(overrides: list[str], precision: str, steps: int = 60) -> float:
    """ms per bare training step (``_common.train_step``, fp32 or bf16 autocast) on the run's own task batches."""
    import torch

    import ablate
    from ablate.data import build_task

    torch.set_num_threads(1)
    cfg = ablate.load_config(C.REPO / "configs/default.yaml", [*overrides, "logger=none"])
    data = build_task(cfg)
    data.setup("fit")
    loader = iter(data.train_dataloader())
    batches = [next(loader) for _ in range(steps)]
    torch.manual_seed(0)
    model = ablate.build_model(cfg)
    step = C.train_step(model, lambda b: model.hidden(b["src_ids"], b["tgt_ids"]), fused_adam=True, projected=True,
                        precision="bf16" if "bf16" in precision else "fp32", pad_id=cfg.data.pad_id)
    for b in batches[:5]:
        step(b)
    t0 = time.perf_counter()
    for b in batches:
        step(b)
    return (time.perf_counter() - t0) / steps * 1e3


def main() -> None:
    args = C.parse_args(__doc__, _add_args)
    if args.child:  # a fresh run process
        config, log, out, start = json.loads(args.child)
        _run_child(config, log, out, start)
        return
    if args.measure:
        _measure(*json.loads(args.measure))
        return
    overrides = QUICK if args.quick else QUICKSTART
    checkouts = {"this checkout": C.REPO, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    settings = {"overrides": overrides, "run": "fresh interpreter" if args.fresh else "forked from a warm parent",
                "threads": 1, "wandb": "offline", "rounds": args.rounds, "runs": args.runs, "workers": args.workers,
                **{name: str(path) for name, path in checkouts.items()}}
    info = C.print_header("run_split: one quickstart run's wall time by part", settings)
    measured = C.interleave({name: (lambda r, path=path: _measured_by(path, overrides, args.fresh))
                             for name, path in checkouts.items()}, rounds=args.rounds, warmup=0)
    steps = measured["this checkout"][0]["steps"]
    floors = {p: bare_ms(overrides, p) for p in sorted({m["precision"] for ms in measured.values() for m in ms})}
    results = {name: _summary(ms, floors) for name, ms in measured.items()}
    headers = ["part"] + [f"{name} s" for name in results] + [f"{name} %" for name in results]
    rows = [[part, *(results[n]["split"][part] for n in results),
             *(100 * results[n]["split"][part] / results[n]["total"] for n in results)] for part in PARTS]
    rows.append(["total (run process)", *(results[n]["total"] for n in results), *(100.0 for _ in results)])
    print(C.table(headers, rows))
    for name, r in results.items():
        floor_s = floors[r["precision"]] * steps / 1e3
        wandb = ", ".join(f"{k} {v:.2f}" for k, v in r["wandb"].items())
        print(f"{name}: precision {r['precision']}, {steps} steps; progress bar {r['progress_bar']:.2f} s, CSV "
              f"logging {r['csv_log']:.2f} s (both in logging/callbacks); W&B {wandb}")
        per_sweep = args.runs / args.workers / 60
        print(f"  compute floor: bare step {floors[r['precision']]:.1f} ms x {steps} = {floor_s:.1f} s a run "
              f"(measured total {r['total']:.1f} s: {r['total'] / floor_s:.2f}x the floor); quickstart of "
              f"{args.runs} runs on {args.workers} workers: floor {floor_s * per_sweep:.1f} min, at this run's "
              f"total {r['total'] * per_sweep:.1f} min")
    if "baseline" in results:
        ratio = results["baseline"]["total"] / results["this checkout"]["total"]
        paired = C.median([b["total"] / a["total"] for a, b in zip(measured["this checkout"], measured["baseline"])])
        print(f"baseline / this checkout, a run's total: {ratio:.2f}x (paired median {paired:.2f}x)")
    C.emit("run_split", info, settings, {"floor_ms": floors, "steps": steps, **results})


def _summary(measured: list[dict], floors: dict[str, float]) -> dict:
    """The median of each part over a contender's runs."""
    return {"split": {part: C.median([m["split"][part] for m in measured]) for part in PARTS},
            "total": C.median([m["total"] for m in measured]), "wall": C.median([m["wall"] for m in measured]),
            "progress_bar": C.median([m["progress_bar"] for m in measured]),
            "csv_log": C.median([m["csv_log"] for m in measured]), "precision": measured[0]["precision"],
            "wandb": {k: C.median([m["wandb"].get(k, 0.0) for m in measured]) for k in measured[0]["wandb"]},
            "runs": len(measured)}


if __name__ == "__main__":
    main()
