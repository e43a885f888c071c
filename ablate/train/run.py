"""``ablate train``: one run, from a validated config to a run directory with its result."""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import LearningRateMonitor, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger, Logger
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from ablate.config.schema import Logger as LoggerKind
from ablate.data import build_task
from ablate.runs.files import config_hash, read_result, write_atomic, write_json
from ablate.runs.lock import run_lock
from ablate.runs.metrics import CURVES, perplexity, steps_done
from ablate.runs.status import Status
from ablate.runtime import allocator_in_use
from ablate.train.callbacks import FiniteLoss, Progress, StopRequest, TokenThroughput, ValidateAtLastStep, WallClock
from ablate.train.checkpoints import AtomicCheckpointIO, step_checkpoint_callback
from ablate.train.kernels import choose_attention_kernel, pin_attention_backends
from ablate.train.logs import drop_adverts, progress, summary_line
from ablate.train.precision import resolve_precision
from ablate.train.preflight import (check_memory, check_not_an_array_member, check_run_dir, check_settings, discard,
                                    make_run_dir)
from ablate.train.resume import ExactResume
from ablate.train.system import TransformerSystem
from ablate.train.threads import use_threads
from ablate.train.validation_bleu import ValidationBleu


class RunFailed(RuntimeError):
    """Training raised; ``result.json`` in ``run_dir`` records why, or, ``removed``, the folder the command made for it
    is gone again (:func:`ablate.train.preflight.discard`)."""

    def __init__(self, run_dir: Path, reason: str, removed: bool = False):
        where = (f"{run_dir} was new and holds no checkpoint: removed, as it was before" if removed
                 else f"see {run_dir / 'result.json'}")
        super().__init__(f"run failed: {reason} ({where})")
        self.run_dir, self.reason, self.removed = run_dir, reason, removed


# Lightning 2.6 on torch 2.13 warns about its own use of a deprecated torch API at every fit.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=Warning)
drop_adverts()


class StepsDoneCSV(CSVLogger):
    """Lightning's CSV logger, its ``step`` column the steps done (:func:`ablate.runs.metrics.steps_done`), as W&B's
    and result.json's."""

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        super().log_metrics(metrics, None if step is None else steps_done(step))


def make_loggers(cfg: DictConfig, run_dir: Path, *, beside_others: bool = False) -> list[Logger]:
    """The loggers a config asks for. CSV is always on, for ablate's own reports: each attempt at a
    run (a resume is a new attempt) writes ``logs/version_<k>/metrics.csv``; see :func:`read_metrics`.
    ``beside_others``: other runs log from this process at the same time (a seed array's members), each to a W&B
    run of its own."""
    loggers: list[Logger] = [StepsDoneCSV(save_dir=str(run_dir), name="logs")]
    if cfg.logger == LoggerKind.wandb:
        from ablate.runs.wandb import make_wandb_logger

        loggers.append(make_wandb_logger(cfg, run_dir, beside_others=beside_others))
    return loggers


def make_trainer(cfg: DictConfig, run_dir: Path, callbacks: list[pl.Callback], *,
                 shards_itself: bool = False) -> pl.Trainer:
    """A Lightning Trainer with the config's ``trainer`` settings passed through.

    ``shards_itself``: the data module splits batches across DDP ranks itself, so Lightning must
    not wrap its sampler in a DistributedSampler.
    """
    t = cfg.train
    checkpoints = [
        ModelCheckpoint(dirpath=run_dir / "checkpoints", filename="best", monitor="val/loss", mode="min",
                        save_last=True),
        LearningRateMonitor(logging_interval="step"),
    ]
    checkpoints += progress(t.log_every, cfg.trainer.enable_progress_bar)  # a bar on a terminal, lines off one
    if t.keep_checkpoints:  # weights of the last k step checkpoints, for checkpoint averaging (section 6.1)
        checkpoints.append(step_checkpoint_callback(run_dir / "checkpoints", keep=t.keep_checkpoints,
                                                    every_n_train_steps=t.checkpoint_every or t.val_every))
    return pl.Trainer(**trainer_settings(cfg, run_dir, gradient_clip_val=t.grad_clip, logger=make_loggers(cfg, run_dir),
                                         callbacks=checkpoints + callbacks, plugins=[AtomicCheckpointIO()],
                                         use_distributed_sampler=not shards_itself))


def trainer_settings(cfg: DictConfig, root: Path, **more: Any) -> dict[str, Any]:
    """The Trainer arguments of every run, solo or a seed array's (:mod:`ablate.train.array`): the device, precision,
    steps, validation and logging intervals, the config's ``trainer`` settings, then ``more``, then
    ``trainer.extra`` (last: the user's word wins)."""
    t, tr = cfg.train, cfg.trainer
    kwargs: dict[str, Any] = dict(
        accelerator=tr.accelerator,
        devices=tr.devices,
        strategy=tr.strategy,
        precision=resolve_precision(tr.precision, tr.accelerator, cfg.model.d_model),
        max_steps=t.max_steps,
        max_epochs=-1,
        val_check_interval=t.val_every,
        check_val_every_n_epoch=None,
        log_every_n_steps=t.log_every,
        accumulate_grad_batches=tr.accumulate_grad_batches,
        limit_val_batches=tr.limit_val_batches,
        num_sanity_val_steps=tr.num_sanity_val_steps,
        deterministic=tr.deterministic,
        enable_progress_bar=tr.enable_progress_bar,
        enable_model_summary=False,  # ablate.train.logs.summary_line instead
        default_root_dir=str(root),
        **more,
    )
    kwargs.update(OmegaConf.to_container(tr.extra, resolve=True))
    return kwargs


def _device(trainer: pl.Trainer) -> str:
    """Where the run trains: ``cpu``, or ``cuda:<i> (<name>)`` (the index within its CUDA_VISIBLE_DEVICES)."""
    device = trainer.strategy.root_device
    return f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)


def _metrics(trainer: pl.Trainer) -> dict[str, float]:
    return {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1 and k not in CURVES}


def train(cfg: DictConfig) -> Path:
    """Train one run and write its run directory.

    If ``output_dir`` holds a checkpoint, training resumes from ``checkpoints/last.ckpt``;
    if it holds a finished run of the very same config, nothing is trained again. While
    it trains, the run directory is locked against other processes (:mod:`ablate.runs.lock`).

    Args:
        cfg: a validated run config (:func:`ablate.load_config`).

    Returns:
        The run directory. ``result.json`` there says ``finished``, ``failed``
        (with the reason) or ``interrupted``.

    Raises:
        RunFailed: training raised; result.json records it, or, in a folder this call made that holds no checkpoint
            to resume from, the folder is removed (``removed``).
        BaseException: what interrupted training (KeyboardInterrupt, SystemExit), after result.json records it.
    """
    start = time.time()
    threads = use_threads(cfg.trainer.threads)  # a bad count is named before anything is built or written
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    check_memory(cfg)  # a model past the machine's memory is refused before building it takes that memory
    # Build first: a component that rejects its arguments fails before anything is written.
    system = TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    data = build_task(cfg)
    check_settings(cfg, system.model, data)
    run_dir, made = make_run_dir(cfg)
    # Under DDP the launcher (rank 0) owns the run directory; the processes it starts only train.
    lead = rank_zero_only.rank == 0
    with run_lock(run_dir) if lead else nullcontext():
        previous = read_result(run_dir) or {}
        if lead:
            check_run_dir(run_dir, cfg, previous)
            check_not_an_array_member(run_dir, previous)
        if previous.get("status") == Status.FINISHED and previous.get("config_hash") == config_hash(cfg):
            return run_dir  # another process finished this very run while we waited to start it
        try:
            _fit(cfg, system, data, run_dir, start, lead, threads)
        except Exception as exc:  # never half made: a folder made for a run that failed, with nothing to resume, goes
            if lead and discard(run_dir, made) and isinstance(exc, RunFailed):
                raise RunFailed(run_dir, exc.reason, removed=True) from exc.__cause__
            raise
    return run_dir


def _fit(cfg: DictConfig, system: TransformerSystem, data: pl.LightningDataModule, run_dir: Path, start: float,
         lead: bool, threads: str) -> None:
    """Train in ``run_dir``, recording the result; ``threads``: the line saying the CPU threads, printed once the
    Trainer is made (a setting Lightning refuses is the only line of a mistake)."""
    write = write_json if lead else (lambda path, data: None)
    if lead:
        write_atomic(run_dir / "config.yaml", OmegaConf.to_yaml(cfg))
    last = run_dir / "checkpoints" / "last.ckpt"
    resume = last if last.is_file() else None
    precision = resolve_precision(cfg.trainer.precision, cfg.trainer.accelerator, cfg.model.d_model)
    result: dict[str, Any] = {"status": Status.RUNNING, "config_hash": config_hash(cfg), "run_dir": str(run_dir),
                              "allocator": allocator_in_use(), "precision": precision}
    write(run_dir / "result.json", {**(read_result(run_dir) or {}), **result})

    throughput, clock = TokenThroughput(pad_id=cfg.data.pad_id, every=cfg.train.log_every), WallClock(start)
    callbacks: list[pl.Callback] = [throughput, clock, FiniteLoss(every=cfg.train.log_every)]
    if cfg.train.val_bleu:
        callbacks.append(ValidationBleu())  # does nothing for tasks without references
    stop = StopRequest(run_dir)
    callbacks += [Progress(run_dir), stop, ValidateAtLastStep()]
    resumer = ExactResume()
    callbacks.append(resumer)  # after the others: it restores the training random states once validation is over
    result.update(parameters=system.n_params["total"], parameters_by_part=system.n_params,
                  resumed_from=str(resume) if resume else None)
    try:  # a Trainer that cannot be made fails the run with its reason, as one that fails to train does
        trainer = make_trainer(cfg, run_dir, callbacks, shards_itself=getattr(data, "shards_itself", False))
        device = trainer.strategy.root_device
        kernel, kernel_note = choose_attention_kernel(system.model, cfg.trainer.attention_kernel, device)
        pin_attention_backends(device)
        result.update(device=_device(trainer), visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
                      threads=torch.get_num_threads(), started_at=start, attention_kernel=kernel)
        for logger in trainer.loggers:
            logger.log_hyperparams({"params/" + k: v for k, v in system.n_params.items()})
    except Exception as exc:
        result.update(status=Status.FAILED, error=f"{type(exc).__name__}: {exc}",
                      traceback=traceback.format_exc(limit=8), wall_time_s=clock.seconds)
        write(run_dir / "result.json", result)
        raise RunFailed(run_dir, result["error"]) from exc
    if lead:
        print(threads, file=sys.stderr)
        print(summary_line(system.model, cfg, system.n_params["total"]), file=sys.stderr)
        if kernel_note:
            print(kernel_note, file=sys.stderr)
    try:
        trainer.fit(system, datamodule=data, ckpt_path=str(resume) if resume else None)
    except Exception as exc:
        result.update(status=Status.FAILED, error=f"{type(exc).__name__}: {exc}",
                      traceback=traceback.format_exc(limit=8))
        raise RunFailed(run_dir, result["error"]) from exc
    except BaseException as exc:  # KeyboardInterrupt, SystemExit: resumable from last.ckpt
        result.update(status=Status.INTERRUPTED, error=type(exc).__name__)
        raise
    else:
        result["status"] = (Status.INTERRUPTED if trainer.interrupted else Status.STOPPED if stop.reason else
                            Status.FINISHED)
        if stop.reason:
            result["stopped_because"] = stop.reason
    finally:
        best = trainer.checkpoint_callback.best_model_score if trainer.checkpoint_callback else None
        best = float(best) if best is not None else math.nan
        result.update(
            step=trainer.global_step,
            final=_metrics(trainer),
            best={"val/loss": best, "val/ppl": perplexity(best)} if math.isfinite(best) else {},
            tokens_per_s=throughput.tokens_per_s,
            train_tokens=throughput.total_tokens,
            wall_time_s=clock.seconds,  # every attempt's (from the checkpoint it resumed), not the last one's alone
        )
        if resume is not None:
            result["resumed_exactly"] = resumer.exact
        write(run_dir / "result.json", result)  # whole: an earlier attempt's error or scores no longer apply
        for logger in trainer.loggers:
            logger.finalize(result["status"])
