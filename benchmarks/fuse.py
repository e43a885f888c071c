"""Seed arrays: member-runs per second of K seeds fused in one model (vmap) against the same K runs one at a time.

Steps: for K = 1, 2, 4, 8, 16, 32 members of one config (``--config``, default configs/default.yaml, the
quickstart's model), a fused training step (``FusedSystem``: forward of every member through vmap, per-member
label-smoothed loss, backward, per-member clipping, Adam over the stacked weights) against K solo steps
(``TransformerSystem``, the same work as ``ablate train``'s step), interleaved in one process. Member-runs per
second = K / (step time x ``--steps-per-run``): what the steps alone of a run cost.

Whole runs (``--runs K``, default 4; 0 skips it): K seeds through ``ablate.train.array.train_array`` against the
same K configs through ``ablate.train.run.train`` one after the other, in this process (``logger=none``): what
a sweep worker pays per run beside its steps (start, validation, checkpoints, records), once per array.

    python benchmarks/fuse.py [--quick] [--threads N] [--device cpu|cuda] [--runs 4] [--run-steps 100]
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

import _common as C
from ablate.config import load_config
from ablate.data import build_task
from ablate.train.fused_system import FusedSystem
from ablate.train.system import TransformerSystem


def _add(p) -> None:
    p.add_argument("--config", default=str(C.REPO / "configs/default.yaml"))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--members", default="1,2,4,8,16,32")
    p.add_argument("--steps-per-run", type=int, default=500, help="a run's steps, for member-runs per second")
    p.add_argument("--runs", type=int, default=4, help="whole runs: K seeds as one array vs one at a time (0: skip)")
    p.add_argument("--run-steps", type=int, default=100)


def _configs(path: str, k: int, *extra: str) -> list[dict]:
    return [OmegaConf.to_container(load_config(path, [f"seed={s}", "trainer.precision=32-true", *extra]),
                                   resolve=True, enum_to_str=True) for s in range(k)]


def _batch(path: str, device: str) -> dict[str, torch.Tensor]:
    task = build_task(load_config(path))
    task.setup("fit")
    return {k: v.to(device) for k, v in next(iter(task.train_dataloader())).items()}


def _stepper(system, batch, device: str):
    system.to(device).train()
    optimizer = torch.optim.Adam(system.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    fused = isinstance(system, FusedSystem)

    def step(_: int) -> None:
        if fused:
            loss = system.training_step(batch, 0)
        else:
            loss, _ = system.training_loss(batch)
        loss.backward()
        if fused:
            system.on_before_optimizer_step(optimizer)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
    return step


def steps(args, results: dict) -> None:
    batch = _batch(args.config, args.device)
    rounds = 3 if args.quick else 8
    rows = []
    solo = _stepper(TransformerSystem(_configs(args.config, 1)[0]), batch, args.device)
    for k in [int(x) for x in args.members.split(",")]:
        stacked = {n: t.unsqueeze(0).expand(k, *t.shape).contiguous() for n, t in batch.items()}  # (K, B, T)
        fused = _stepper(FusedSystem(_configs(args.config, k)), stacked, args.device)
        times = C.interleave({"fused": fused, "solo": solo}, rounds=rounds)
        t_fused, t_solo = C.median(times["fused"]), C.median(times["solo"])
        per_run = args.steps_per_run
        row = {"members": k, "fused_step_ms": 1e3 * t_fused, "solo_step_ms": 1e3 * t_solo,
               "fused_member_runs_per_s": k / (t_fused * per_run), "solo_member_runs_per_s": 1 / (t_solo * per_run)}
        row["ratio"] = row["fused_member_runs_per_s"] / row["solo_member_runs_per_s"]
        rows.append(row)
    print(C.table(["members", "fused step ms", "K solo steps ms", "fused member-runs/s", "solo member-runs/s",
                   "fused / solo"],
                  [[r["members"], C.fmt(r["fused_step_ms"]), C.fmt(r["members"] * r["solo_step_ms"]),
                    C.fmt(r["fused_member_runs_per_s"]), C.fmt(r["solo_member_runs_per_s"]), C.fmt(r["ratio"])]
                   for r in rows]))
    results["steps"] = rows


def whole_runs(args, results: dict) -> None:
    from ablate.train.array import train_array
    from ablate.train.run import train

    k, n = args.runs, args.run_steps
    extra = ["logger=none", "trainer.enable_progress_bar=false", f"train.max_steps={n}",
             f"train.val_every={max(1, n // 5)}", f"trainer.threads={torch.get_num_threads()}"]  # --threads, kept
    accelerator = "gpu" if args.device == "cuda" else "cpu"
    times = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
        cfgs = lambda name: [load_config(args.config, [f"seed={s}", f"output_dir={tmp}/{name}/runs/{s}",  # noqa
                                                       f"trainer.accelerator={accelerator}", *extra])
                             for s in range(k)]
        t0 = time.perf_counter()
        train_array(cfgs("array"))
        times["array"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for cfg in cfgs("solo"):
            train(cfg)
        times["solo"] = time.perf_counter() - t0
    print(f"\nwhole runs ({k} seeds, {n} steps each, validation every {max(1, n // 5)}, in this process): one array "
          f"{times['array']:.1f} s, one at a time {times['solo']:.1f} s: fused / solo member-runs per second "
          f"{times['solo'] / times['array']:.2f}")
    results["whole_runs"] = {"members": k, "steps": n, "array_s": times["array"], "solo_s": times["solo"],
                             "ratio": times["solo"] / times["array"]}


def main() -> None:
    args = C.parse_args(__doc__, _add)
    if args.quick:
        args.members, args.run_steps = "1,2,4,8", 40
    settings = {"config": Path(args.config).name, "device": args.device, "members": args.members,
                "steps_per_run": args.steps_per_run, "runs": args.runs, "run_steps": args.run_steps,
                "precision": "fp32"}
    machine = C.print_header("seed arrays: fused members vs solo runs", settings)
    results: dict = {}
    steps(args, results)
    if args.runs:
        whole_runs(args, results)
    C.emit("fuse", machine, settings, results)


if __name__ == "__main__":
    main()
