"""Framework overhead: ``ablate train``'s Lightning step loop against a bare PyTorch loop over the same model.

The Lightning side is what ``ablate train`` runs: ``TransformerSystem`` in a Trainer built by
``ablate.train.run.make_trainer`` (checkpointing, LR monitor, CSV logger with logger=none, progress
bar, TokenThroughput and FiniteLoss callbacks). The bare side: the same model (same seed), Adam with
the same betas/eps, the same LambdaLR schedule, label-smoothed cross-entropy, zero_grad/backward/
step/scheduler step. Both iterate the same DataLoader over the same N materialised batches, moving
each batch to the device per step. Time per step = interval between consecutive batch starts, so
everything between steps (logging, callbacks, data fetching) counts; the first `warmup` steps of each
run and trainer setup/teardown are left out (fit wall time is shown for information).

    python benchmarks/overhead.py [--quick] [--threads N]
"""

from __future__ import annotations

import io
import logging
import tempfile
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader

import _common as C
import ablate
from ablate import registry
from ablate.data import build_task
from ablate.train.callbacks import FiniteLoss, TokenThroughput
from ablate.train.precision import resolve_precision
from ablate.train.run import make_trainer
from ablate.train.system import TransformerSystem

# name: (config, steps, warmup, rounds, quick steps, quick rounds, synthetic max_tokens or None = task batches)
CASES = {
    "default": ("configs/default.yaml", 150, 10, 3, 50, 1, None),
    "multi30k": ("configs/multi30k.yaml", 10, 2, 3, 5, 1, 1024),
}


class StepStarts(pl.Callback):
    """perf_counter() at the start of every training batch."""

    def __init__(self):
        self.stamps: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.stamps.append(time.perf_counter())


def materialise(cfg, n: int, max_tokens: int | None) -> list[dict]:
    if max_tokens is not None:  # Multi30k-sized batches without tokenising Multi30k
        return C.synthetic_batches(n, max_tokens=max_tokens, vocab_size=cfg.data.vocab_size)
    data = build_task(cfg)
    data.setup("fit")
    loader = iter(data.train_dataloader())
    return [next(loader) for _ in range(n)]


def loader(batches: list[dict]) -> DataLoader:
    return DataLoader(batches, batch_size=None, collate_fn=lambda b: b)


def lightning_run(cfg, batches: list[dict], bar: bool = True) -> list[float]:
    if not bar:
        cfg = OmegaConf.merge(cfg, {"trainer": {"enable_progress_bar": False}})
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    system = TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    starts = StepStarts()
    callbacks = [TokenThroughput(pad_id=cfg.data.pad_id, every=cfg.train.log_every),
                 FiniteLoss(every=cfg.train.log_every), starts]
    with tempfile.TemporaryDirectory() as run_dir, redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        trainer = make_trainer(cfg, Path(run_dir), callbacks)
        trainer.fit(system, train_dataloaders=loader(batches))
    return starts.stamps


def bare_run(cfg, batches: list[dict]) -> list[float]:
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = "bf16" in resolve_precision(cfg.trainer.precision)
    model = ablate.build_model(cfg).to(device).train()
    t = cfg.train
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay)
    context = {"d_model": cfg.model.d_model, "lr": t.lr, "max_steps": t.max_steps}
    sched = LambdaLR(opt, registry.create("schedule", t.schedule, context, OmegaConf.to_container(t.schedule_args)))
    stamps = []
    for batch in loader(batches):
        stamps.append(time.perf_counter())
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            logits = model(batch["src_ids"], batch["tgt_ids"])  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=cfg.data.pad_id,
                                   label_smoothing=t.label_smoothing)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        del logits, loss  # as Lightning does: the next forward must not find the old logits alive
    if device == "cuda":
        torch.cuda.synchronize()
    return stamps


def run_case(name: str, quick: bool) -> dict:
    path, steps, warmup, rounds, q_steps, q_rounds, max_tokens = CASES[name]
    steps, rounds = (q_steps, q_rounds) if quick else (steps, rounds)
    cfg = ablate.load_config(C.REPO / path, ["logger=none", f"train.max_steps={steps}"])
    batches = materialise(cfg, steps, max_tokens)
    print(f"\n[{name}] {path}: d_model {cfg.model.d_model}, {cfg.model.n_layers} layers, {steps} steps "
          f"({warmup} warm-up steps left out), {rounds} rounds, batch shape {tuple(batches[0]['tgt_ids'].shape)}, "
          f"precision {resolve_precision(cfg.trainer.precision)}")
    walls: dict[str, list[float]] = {"lightning": [], "no_bar": [], "bare": []}

    def contender(fn, key):
        def run(r: int) -> float:
            t0 = time.perf_counter()
            stamps = fn(cfg, batches, False) if key == "no_bar" else fn(cfg, batches)
            walls[key].append(time.perf_counter() - t0)
            return (stamps[-1] - stamps[warmup]) / (len(stamps) - 1 - warmup)  # mean s/step in the steady state
        return run

    contenders = {"lightning": contender(lightning_run, "lightning"), "bare": contender(bare_run, "bare")}
    if name == "default":  # overhead-dominated: also without the progress bar
        contenders["no_bar"] = contender(lightning_run, "no_bar")
    per_step = C.interleave(contenders, rounds=rounds, warmup=0)
    light, bare = C.median(per_step["lightning"]), C.median(per_step["bare"])
    paired = C.median([a / b for a, b in zip(per_step["lightning"], per_step["bare"])])
    rows = [["ablate train (Lightning)", light * 1e3, C.spread([x * 1e3 for x in per_step["lightning"]]),
             C.median(walls["lightning"]), light / bare],
            ["bare PyTorch loop", bare * 1e3, C.spread([x * 1e3 for x in per_step["bare"]]), C.median(walls["bare"]),
             1.0]]
    if "no_bar" in per_step:
        nb = C.median(per_step["no_bar"])
        rows.insert(1, ["ablate train, no progress bar", nb * 1e3, C.spread([x * 1e3 for x in per_step["no_bar"]]),
                        C.median(walls["no_bar"]), nb / bare])
    print(C.table(["loop", "ms/step", "range", "run wall s", "time ratio"], rows))
    print(f"Lightning / bare time per step: {light / bare:.3f} (paired median {paired:.3f}); "
          f"overhead {1e3 * (light - bare):+.2f} ms/step; goal <= 1.05")
    ms = {k: C.median(v) * 1e3 for k, v in per_step.items()}
    return {"config": path, "steps": steps, "rounds": rounds, "ms_per_step": ms,
            "ratio": light / bare, "paired_ratio": paired, "overhead_ms_per_step": 1e3 * (light - bare),
            "run_wall_s": {k: C.median(v) for k, v in walls.items() if v}}


def main() -> None:
    args = C.parse_args(__doc__)
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    settings = {"cases": list(CASES), "quick": args.quick, "logger": "none (CSV only)", "progress_bar": "as configured"}
    info = C.print_header("overhead: ablate train (Lightning) vs a bare PyTorch loop", settings)
    results = {name: run_case(name, args.quick) for name in CASES}
    C.emit("overhead", info, settings, results)


if __name__ == "__main__":
    main()
