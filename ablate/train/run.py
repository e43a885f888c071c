"""``ablate train``: one run, from a validated config to a run directory with its result."""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import LearningRateMonitor
from pytorch_lightning.loggers import CSVLogger, Logger
from pytorch_lightning.utilities.exceptions import SIGTERMException
from pytorch_lightning.utilities.rank_zero import rank_zero_only
from pytorch_lightning.utilities.warnings import PossibleUserWarning

from ablate.config.schema import Logger as LoggerKind
from ablate.data import build_task
from ablate.errors import ConfigError
from ablate.runs.files import (checkpoints_dir, config_hash, config_path, last_checkpoint, log_path,
                               read_result, result_path, resume_command, write_atomic, write_result)
from ablate.runs.lock import run_lock
from ablate.runs.metrics import steps_done
from ablate.runs.status import Status
from ablate.train.callbacks import (Best, FinalValues, FiniteLoss, Progress, SignalStop, StopRequest, TokenThroughput,
                                    ValidateAtLastStep, WallClock)
from ablate.train.life import failure, trace
from ablate.train.signals import Interrupted
from ablate.train.checkpoints import (AtomicCheckpointIO, checkpoint_every, clear_checkpoints, last_checkpoint_callback,
                                      step_checkpoint_callback)
from ablate.train.kernels import choose_attention_kernel, pin_attention_backends
from ablate.train.precision import run_precision
from ablate.train.logs import drop_adverts, progress, summary_line
from ablate.train.preflight import (check_memory, check_not_an_array_member, check_run_dir, check_settings, discard,
                                    make_run_dir, previous_result)
from ablate.train.record import Attempt, Outcome, run_result
from ablate.train.resume import ExactResume
from ablate.train.system import TransformerSystem
from ablate.train.threads import use_threads
from ablate.train.validation_bleu import ValidationBleu


class RunFailed(RuntimeError):
    """Training raised; ``result.json`` in ``run_dir`` records why, or, ``removed``, the folder the command made for it
    is gone again: it failed before training started (:func:`ablate.train.preflight.discard`). ``others``: how many
    more runs' result.json record the same failure (the other members of a seed array that failed as a whole)."""

    def __init__(self, run_dir: Path, reason: str, removed: bool = False, *, others: int = 0):
        also = f", and the result.json of its seed array's {others} other member{'s' * (others != 1)}" if others else ""
        where = (f"{run_dir} was new and training had not started: removed, as it was before" if removed
                 else f"see {result_path(run_dir)}{also}")
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


def log_parameters(loggers: list[Logger], n_params: dict[str, int]) -> None:
    """Log the model's size (``params/total`` and by part: one member's, for a seed array) as the run's
    hyperparameters: what a W&B run's config shows beside the run config."""
    for logger in loggers:
        logger.log_hyperparams({"params/" + k: v for k, v in n_params.items()})


def make_trainer(cfg: DictConfig, run_dir: Path, callbacks: list[pl.Callback], *,
                 shards_itself: bool = False) -> pl.Trainer:
    """A Lightning Trainer with the config's ``trainer`` settings passed through.

    ``shards_itself``: the data module splits batches across DDP ranks itself, so Lightning must
    not wrap its sampler in a DistributedSampler.
    """
    t = cfg.train
    # last.ckpt at every validation (best.ckpt: the Best callback); a run that starts over holds no checkpoint of an
    # earlier attempt (checkpoints.clear_checkpoints)
    checkpoints = [last_checkpoint_callback(checkpoints_dir(run_dir)), LearningRateMonitor(logging_interval="step")]
    checkpoints += progress(t.log_every, cfg.trainer.enable_progress_bar)  # a bar on a terminal, lines off one
    if t.keep_checkpoints:  # weights of the last k step checkpoints, for checkpoint averaging (section 6.1)
        checkpoints.append(step_checkpoint_callback(checkpoints_dir(run_dir), keep=t.keep_checkpoints,
                                                    every_n_train_steps=checkpoint_every(cfg)))
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
        precision=run_precision(cfg),
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


def train(cfg: DictConfig) -> Path:
    """Train one run and write its run directory.

    If ``output_dir`` holds a checkpoint, training resumes from ``checkpoints/last.ckpt``;
    if it holds a finished run of the very same config, nothing is trained again. While
    it trains, the run directory is locked against other processes (:mod:`ablate.runs.lock`).
    SIGINT and SIGTERM stop it at the end of a step, with that step's checkpoint (:class:`SignalStop`).

    Args:
        cfg: a validated run config (:func:`ablate.load_config`).

    Returns:
        The run directory. ``result.json`` there says ``finished``, ``failed``
        (with the reason) or ``interrupted``.

    Raises:
        RunFailed: training raised; result.json records it, or, when it failed before training started in a folder
            this call made, the folder is removed (``removed``).
        Interrupted: SIGINT or SIGTERM stopped it, after result.json recorded it (``run_dir``, ``step``; ``removed``
            when training had not started in a folder this call made, which is removed).
        BaseException: what else interrupted training (KeyboardInterrupt, SystemExit), after result.json records it.
    """
    start = time.time()
    lead = rank_zero_only.rank == 0  # under DDP the launcher (rank 0) owns the run directory; the others only train
    stop = SignalStop()
    if lead:
        stop.install()
    try:
        return _train(cfg, start, lead, stop)
    finally:
        stop.uninstall()


def _train(cfg: DictConfig, start: float, lead: bool, stop: SignalStop) -> Path:
    threads = use_threads(cfg.trainer.threads)  # a bad count is named before anything is built or written
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    check_memory(cfg)  # a model past the machine's memory is refused before building it takes that memory
    # Build first: a component that rejects its arguments fails before anything is written.
    system = TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    data = build_task(cfg)
    check_settings(cfg, system.model, data)
    run_dir, made = make_run_dir(cfg)
    stop.checkpoint = last_checkpoint(run_dir)
    with run_lock(run_dir) if lead else nullcontext():
        try:
            previous = previous_result(run_dir)
            if lead:
                check_run_dir(run_dir, cfg, previous)
                check_not_an_array_member(run_dir, previous)
            if previous.get("status") == Status.FINISHED and previous.get("config_hash") == config_hash(cfg):
                return run_dir  # another process finished this very run while we waited to start it
            _fit(cfg, system, data, run_dir, start, lead, threads, stop)
        except ConfigError:  # refused: the lock leaves the folder as it was
            raise
        except BaseException as exc:  # a run that started training is an outcome: its folder stays, with its record
            removed = lead and not stop.started and discard(run_dir, made)
            if isinstance(exc, Interrupted):
                exc.run_dir, exc.removed = run_dir, removed
            if removed and isinstance(exc, RunFailed):
                raise RunFailed(run_dir, exc.reason, removed=True) from exc.__cause__
            raise
    return run_dir


def _log(run_dir: Path, text: str) -> None:
    """Append ``text`` to the run's ``train.log``: what ablate says about each attempt at the run, kept with it. Not
    when this process's stderr is that file already (a sweep's run, whose whole output goes there)."""
    path = log_path(run_dir)
    try:
        if path.exists() and os.path.samestat(os.fstat(sys.stderr.fileno()), path.stat()):
            return
    except (OSError, ValueError, AttributeError):  # stderr is no file (captured by a caller)
        pass
    with open(path, "a") as log:
        log.write(text.rstrip("\n") + "\n")


@contextmanager
def _exact_resume_is_quiet(data: pl.LightningDataModule):
    """Lightning warns, resuming from a checkpoint saved in the middle of an epoch, that a DataLoader without a
    ``state_dict`` "can cause unreliable results". A task with ``resume_from`` needs none: its sampler starts the
    next loader at the checkpoint's batch (:class:`ExactResume` keeps the position), and the resumed run is the
    uninterrupted one bit for bit (tests/train/test_interrupt.py, tests/train/test_resume.py). For such a task alone,
    that warning is silenced; a task without it resumes inexactly, and the warning is right."""
    with warnings.catch_warnings():
        if getattr(data, "resume_from", None) is not None:
            warnings.filterwarnings("ignore", message=r"You're resuming from a checkpoint that ended before the epoch "
                                    r"ended and your dataloader is not resumable", category=PossibleUserWarning)
        yield


def _fit(cfg: DictConfig, system: TransformerSystem, data: pl.LightningDataModule, run_dir: Path, start: float,
         lead: bool, threads: str, stop: SignalStop) -> None:
    """Train in ``run_dir``, recording the result; ``threads``: the line saying the CPU threads, printed once the
    Trainer is made (a setting Lightning refuses is the only line of a mistake)."""
    record = write_result if lead else (lambda run_dir, result, merge=False: None)
    note = (lambda text: _log(run_dir, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}")) if lead else (lambda text: None)
    if lead:
        write_atomic(config_path(run_dir), OmegaConf.to_yaml(cfg))
    last = last_checkpoint(run_dir)
    resume = last if last.is_file() else None
    if lead and resume is None:  # starting over: an earlier attempt's best.ckpt and step checkpoints are not this run's
        clear_checkpoints(checkpoints_dir(run_dir))
    throughput, clock = TokenThroughput(pad_id=cfg.data.pad_id, every=cfg.train.log_every), WallClock(start)
    values, best = FinalValues(), Best(run_dir, cfg)
    callbacks: list[pl.Callback] = [throughput, clock, values, FiniteLoss(every=cfg.train.log_every), best]
    if cfg.train.val_bleu:
        callbacks.append(ValidationBleu())  # does nothing for tasks without references
    requested = StopRequest(run_dir)
    callbacks += [Progress(run_dir), requested, ValidateAtLastStep()]
    resumer = ExactResume()
    # after the others: the resumer restores the training random states once validation is over, and a stop on a
    # signal saves its checkpoint once every other callback is done with the step
    callbacks += [resumer, stop]
    attempt = Attempt(started_at=start, parameters=system.n_params, resumed_from=resume)
    try:  # a Trainer that cannot be made fails the run with its reason, as one that fails to train does
        trainer = make_trainer(cfg, run_dir, callbacks, shards_itself=getattr(data, "shards_itself", False))
        device = trainer.strategy.root_device
        kernel, kernel_note = choose_attention_kernel(system.model, cfg.trainer.attention_kernel, device)
        pin_attention_backends(device)
        attempt = Attempt(started_at=start, parameters=system.n_params, resumed_from=resume, attention_kernel=kernel)
        log_parameters(trainer.loggers, system.n_params)
    except Exception as exc:
        error = failure(exc)
        record(run_dir, run_result(cfg, run_dir, None, attempt, Outcome(
            Status.FAILED, step=None, error=error, traceback=trace(), wall_time_s=clock.seconds)))
        note(f"failed before training started: {error}")
        raise RunFailed(run_dir, error) from exc
    if trainer.world_size > 1:  # DDP: a checkpoint is saved by every process together; Lightning's handling stays
        stop.uninstall()
    record(run_dir, run_result(cfg, run_dir, trainer, attempt), merge=True)
    note(f"ablate train: {'resuming from ' + str(resume) if resume else 'training from the first step'} "
         f"({run_precision(cfg)}, {kernel}, device {device})")
    for line in (threads, summary_line(system.model, cfg, system.n_params["total"]), kernel_note):
        if line and lead:
            print(line, file=sys.stderr)
            note(line)
    outcome, interrupted = Outcome(Status.INTERRUPTED, step=0), None
    try:
        with _exact_resume_is_quiet(data):
            trainer.fit(system, datamodule=data, ckpt_path=str(resume) if resume else None)
    except Interrupted as exc:
        outcome.interrupted_by, outcome.error, interrupted = exc.name, exc.error, exc
        raise
    except SIGTERMException as exc:  # Lightning's own (DDP), a bare SystemExit: a stop on SIGTERM all the same
        interrupted = Interrupted(signal.SIGTERM)
        outcome.interrupted_by, outcome.error = interrupted.name, interrupted.error
        raise interrupted from exc
    except Exception as exc:
        outcome.status, outcome.error = Status.FAILED, failure(exc)
        outcome.traceback = trace()
        raise RunFailed(run_dir, outcome.error) from exc
    except BaseException as exc:  # KeyboardInterrupt, SystemExit: resumable from last.ckpt
        outcome.error = type(exc).__name__
        raise
    else:
        outcome.status = (Status.INTERRUPTED if trainer.interrupted else Status.STOPPED if requested.reason else
                          Status.FINISHED)
        outcome.stopped_because = requested.reason
    finally:
        outcome.step, outcome.final, outcome.best = trainer.global_step, values.final(trainer), best.value
        outcome.train_tokens, outcome.tokens_per_s = throughput.total_tokens, throughput.tokens_per_s
        outcome.wall_time_s, outcome.resumed_exactly = clock.seconds, resumer.exact
        result = run_result(cfg, run_dir, trainer, attempt, outcome)
        if resume is not None and values.restored is None:  # stopped before it read its checkpoint: what it holds
            earlier = read_result(run_dir) or {}  # is what the attempt before recorded (its step, final, best)
            result.update({k: earlier[k] for k in ("step", "final", "best", "train_tokens") if k in earlier})
        record(run_dir, result)  # whole: an earlier attempt's error or scores no longer apply
        if interrupted is not None:
            interrupted.step = result.get("step")
        for logger in trainer.loggers:
            logger.finalize(result["status"])
        ending = f"{outcome.status} at step {result.get('step')}"
        if outcome.status == Status.FAILED:
            ending += f": {outcome.error}" + (f"\n{outcome.traceback}" if outcome.traceback else "")
        elif outcome.status == Status.INTERRUPTED:
            ending += f" ({outcome.interrupted_by or outcome.error}); resume with: {resume_command(run_dir)}"
        note(ending)
