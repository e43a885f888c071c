"""A short probe of what one run of a shape costs on this machine: a few timed training steps, one validation batch,
and (a sweep with ``evaluate:``) a few sentences decoded, each scaled to the run's config (``train.max_steps``,
``train.val_every``, the validation and test splits' sizes).

The probe builds the run's model and data module as ``ablate train`` does (:class:`ablate.train.system.
TransformerSystem`, :func:`ablate.data.build_task`) but no Trainer: nothing is logged (no W&B: ``WANDB_MODE`` is
``disabled`` while it runs), nothing is written in the sweep's folder (a checkpoint's write is timed in a temporary
file), and the random streams are the caller's again after it. It runs in the launching process with one slot's
threads (``OMP_NUM_THREADS`` of :func:`ablate.sweep.slots.slots`) and on that slot's GPU, so its steps cost what a
worker's do. A few seconds a shape for a tiny model; runs that differ only by their seed share one probe.

What it leaves out: the run's process start (the pool forks runs from a warm server, :mod:`ablate.sweep.warm`),
``train.val_bleu``'s decoding at each validation, and two workers' runs slowing each other on shared memory
bandwidth; ``benchmarks/projection.py`` measures the projection against the actual.
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from omegaconf import DictConfig, OmegaConf

from ablate.runs.files import variant_hash
from ablate.runs.projection import Projection, RunCost
from ablate.sweep.projection import project
from ablate.train.threads import usable_cores

WARMUP_STEPS = 1  # untimed: the first step allocates and fills caches
TIMED_STEPS = 3
DECODED_SENTENCES = 8  # the evaluate: decode's sample, spread over the split
EVALUATED_SETTINGS = ("split", "beam", "alpha")  # the evaluate: options that change what its decode costs


@contextmanager
def _quiet(threads: int) -> Iterator[None]:
    """W&B off, ``threads`` torch threads and the caller's random streams kept, for the probe's length."""
    before, wandb = torch.get_num_threads(), os.environ.get("WANDB_MODE")
    os.environ["WANDB_MODE"] = "disabled"
    torch.set_num_threads(max(1, threads))
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(before)
        if wandb is None:
            os.environ.pop("WANDB_MODE", None)
        else:
            os.environ["WANDB_MODE"] = wandb


def _timed(fn, device: torch.device) -> float:
    """Seconds ``fn()`` takes, the device's queue drained before the clock stops."""
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _on(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _batches(loader_of) -> Iterator[Any]:
    """A loader's batches, again from its start when it ends (a tiny split has fewer than the probe's steps)."""
    for _ in itertools.count():
        yield from loader_of()


def validations(cfg: DictConfig) -> int:
    """How many times a run of ``cfg`` validates: every ``val_every`` steps and at its last
    (:class:`ablate.train.callbacks.ValidateAtLastStep`)."""
    steps, every = int(cfg.train.max_steps), int(cfg.train.val_every or cfg.train.max_steps)
    return steps // every + (1 if steps % every else 0)


def val_batches(cfg: DictConfig, n: int) -> int:
    """Of a validation's ``n`` batches, those a run reads (``trainer.limit_val_batches``: a count above 1, else a
    share)."""
    limit = cfg.trainer.limit_val_batches
    if limit is None:
        return n
    return min(n, int(limit)) if float(limit) > 1 else max(1, int(n * float(limit)))


def checkpoint_writes(cfg: DictConfig) -> int:
    """The checkpoints a run writes: best and last at each validation, and every kept step checkpoint's."""
    t = cfg.train
    kept = int(t.max_steps) // int(t.checkpoint_every or t.max_steps) if t.keep_checkpoints else 0
    return 2 * validations(cfg) + kept


def probe_run(cfg: DictConfig, evaluate: dict[str, Any] | None, *, threads: int, device: str = "cpu") -> RunCost:
    """What one run of ``cfg`` costs here, by part (:class:`ablate.sweep.projection.RunCost`), from a short probe.

    Args:
        cfg: the run's validated config.
        evaluate: the sweep's ``evaluate:`` options (None: it evaluates nothing).
        threads: CPU threads, as one of the pool's slots has; device: ``cpu`` or ``cuda:<i>``.
    """
    from ablate.data import build_task
    from ablate.train.precision import run_precision
    from ablate.train.system import TransformerSystem, optimizers

    where = torch.device(device)
    with _quiet(threads):
        start = time.perf_counter()
        torch.manual_seed(int(cfg.seed))
        system = TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)).to(where)
        data = build_task(cfg)
        data.prepare_data()
        data.setup("fit")
        setup = time.perf_counter() - start
        precision = run_precision(cfg)
        dtype = torch.bfloat16 if "bf16" in precision else torch.float16 if "16" in precision else None
        autocast = (lambda: torch.autocast(where.type, dtype=dtype)) if dtype is not None else \
            (lambda: torch.autocast(where.type, enabled=False))
        optimizer = optimizers(system, cfg)["optimizer"]
        train = _batches(data.train_dataloader)
        micro = int(cfg.trainer.accumulate_grad_batches or 1)

        def step() -> None:
            system.train()
            for _ in range(micro):
                with autocast():
                    loss = system.training_step(_on(next(train), where), 0)
                loss.backward()
            if cfg.train.grad_clip:
                torch.nn.utils.clip_grad_norm_(system.parameters(), cfg.train.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for _ in range(WARMUP_STEPS):
            _timed(step, where)
        per_step = sum(_timed(step, where) for _ in range(TIMED_STEPS)) / TIMED_STEPS
        per_val, n_val = _validation_batch(system, data.val_dataloader(), where, autocast)
        with tempfile.TemporaryFile() as file:  # never the sweep's folder
            save = _timed(lambda: torch.save({"state_dict": system.state_dict(),
                                              "optimizer": optimizer.state_dict()}, file), where)
        evaluated = _evaluate(system, data, cfg, evaluate, where) if evaluate is not None else 0.0
    sanity = int(cfg.trainer.num_sanity_val_steps or 0)
    sanity = val_batches(cfg, n_val) if sanity < 0 else min(sanity, n_val)
    return RunCost(train=per_step * int(cfg.train.max_steps),
                   validate=per_val * (val_batches(cfg, n_val) * validations(cfg) + sanity),
                   evaluate=evaluated, other=setup + save * checkpoint_writes(cfg))


def probe_sweep(jobs: list[list[Any]], config_of: Callable[[Any], DictConfig], evaluate: dict[str, Any] | None,
                slot: dict[str, str], workers: int, *, later_looks: int = 0) -> Projection:
    """The projection (:func:`ablate.sweep.projection.project`) of ``jobs`` (each a list of planned runs: a run alone
    or a seed array) on ``workers`` slots like ``slot``, each distinct shape probed once (:func:`probe_run`; seeds of
    one variant share their variant's hash)."""
    device = f"cuda:{slot['CUDA_VISIBLE_DEVICES'].split(',')[0]}" if slot.get("CUDA_VISIBLE_DEVICES") and \
        torch.cuda.is_available() else "cpu"
    threads = int(slot.get("OMP_NUM_THREADS") or 1)
    start, by_hash, costs = time.perf_counter(), {}, {}
    for run in (r for job in jobs for r in job):
        if run.variant in costs:
            continue
        cfg = config_of(run)
        key = variant_hash(cfg)
        if key not in by_hash:
            by_hash[key] = probe_run(cfg, evaluate, threads=threads, device=device)
        costs[run.variant] = by_hash[key]
    if device.startswith("cuda"):  # the launcher lives on beside the runs: the probes' memory is theirs
        torch.cuda.empty_cache()
    cores = usable_cores()
    load = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else None  # the machine's
    shared = workers * threads / cores if device == "cpu" else 1.0  # a slot has at least one thread, however few cores
    return project([[r.variant for r in job] for job in jobs], costs, workers, later_looks=later_looks,
                   probe_seconds=time.perf_counter() - start, device=device, load=load, shared=shared)


@torch.no_grad()
def _validation_batch(system, loader, where: torch.device, autocast) -> tuple[float, int]:
    """One validation batch's seconds (its second pass: the first warms its shapes) and the split's batches."""
    system.eval()
    batch = _on(next(iter(loader)), where)

    def once() -> None:
        with autocast():
            system.validation_step(batch, 0)
    _timed(once, where)
    return _timed(once, where), len(loader)


def _evaluate(system, data, cfg: DictConfig, evaluate: dict[str, Any], where: torch.device) -> float:
    """The ``evaluate:`` decode's seconds: :data:`DECODED_SENTENCES` of the split, spread over it, decoded as
    ``ablate evaluate`` does, each up to its reference's length (what a trained model writes: an untrained one runs
    to the |x| + 50 limit), scaled to the split. A language model's evaluation scores the test split's batches: one
    is timed and scaled."""
    from ablate.decode import translate
    from ablate.evaluate.evaluate import evaluate_run

    defaults = inspect.signature(evaluate_run).parameters  # ablate evaluate's own defaults, asked of it
    settings = {k: evaluate.get(k, defaults[k].default) for k in EVALUATED_SETTINGS}
    if not hasattr(data, "references"):
        loader = data.test_dataloader() if hasattr(data, "test_dataloader") else data.val_dataloader()
        seconds, n = _validation_batch(system, loader, where, lambda: torch.autocast(where.type, enabled=False))
        return seconds * n
    encoded = data.encoded(settings["split"])
    n = len(encoded)
    if not n:
        return 0.0
    picks = list(range(0, n, max(1, n // DECODED_SENTENCES)))[:DECODED_SENTENCES]
    sources = [list(encoded[i]["src_ids"]) for i in picks]
    ratio = sum(len(encoded[i]["tgt_ids"]) for i in picks) / max(1, sum(len(s) for s in sources))
    system.eval()
    seconds = _timed(lambda: translate(system.model, sources, bos_id=cfg.data.bos_id, eos_id=cfg.data.eos_id,
                                       pad_id=cfg.data.pad_id, beam=int(settings["beam"]),
                                       alpha=float(settings["alpha"]), max_len_a=ratio, max_len_b=1), where)
    return seconds * n / len(picks) if math.isfinite(seconds) else 0.0
