"""``ablate train-array``: the seeds of one variant trained as one fused model in one process (a seed array).

Every member is an ordinary run to everything that reads runs: it has its run directory (its ``output_dir``), its
``config.yaml``, ``result.json``, ``progress.json``, logs, W&B run and checkpoints (:mod:`ablate.train.members`), and
its result says ``fused: {members, index, array}``. What the array alone keeps is its own checkpoint, in
``array_dir`` (``last.ckpt``: the stacked weights, optimiser, loop and random states, each member's data position),
from which a killed or interrupted array resumes; a resumed array gives each member what the uninterrupted one gives.

Members are the configs given, which must differ in ``seed`` alone (and in where they are written and logged).
"""

from __future__ import annotations

import hashlib
import sys
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf

from ablate.data import build_task
from ablate.data.members import MemberData
from ablate.errors import COMMAND_LINE, ConfigError
from ablate.runs.files import (ARRAY_FILE, BEST_CHECKPOINT, CHECKPOINTS_DIR, CONFIG_FILE, LAST_CHECKPOINT,
                               PROGRESS_FILE, RESULT_FILE, array_resume_command, being_written, config_hash,
                               config_path, read_result, variant_hash, write_atomic, write_json, write_result)
from ablate.runs.lock import run_lock
from ablate.runs.status import SETTLED, Status
from ablate.runs.sweep_folder import ARRAYS_DIR
from ablate.train.callbacks import SignalStop, ValidateAtLastStep, WallClock
from ablate.train.checkpoints import AtomicCheckpointIO, checkpoint_every, last_checkpoint_callback
from ablate.train.fusable import why_not_fused
from ablate.train.fused_system import FusedSystem
from ablate.train.kernels import choose_attention_kernel, pin_attention_backends
from ablate.train.life import failure, tokens_per_s, trace
from ablate.train.members import Member, Members
from ablate.train.preflight import check_settings, make_run_dir
from ablate.train.record import Attempt, Outcome, run_result
from ablate.train.resume import ArrayResume
from ablate.train.logs import progress
from ablate.train.run import RunFailed, log_parameters, make_loggers, trainer_settings
from ablate.train.signals import Interrupted
from ablate.train.threads import use_threads
from ablate.train.validation_bleu import MemberBleu


def array_dir_of(cfgs: list[DictConfig]) -> Path:
    """The array's own folder: ``<parent of the first member>/../arrays/<hash of the members>``; the same members
    (same configs, same run directories) find the same folder, and resume from it."""
    key = "\n".join(f"{Path(c.output_dir).resolve()}:{config_hash(c)}" for c in cfgs)
    first = Path(cfgs[0].output_dir)
    return first.parent.parent / ARRAYS_DIR / hashlib.sha256(key.encode()).hexdigest()[:12]


def check_members(cfgs: list[DictConfig]) -> None:
    """Raises ConfigError unless the configs are runs of one variant that fuses, each with its own seed and
    output_dir."""
    if len({variant_hash(c) for c in cfgs}) > 1:
        raise ConfigError("CONFIG", ", ".join(str(c.output_dir) for c in cfgs),
                          "configs of one variant that differ in their seed alone (a seed array)", COMMAND_LINE)
    for key, values in (("seed", [c.seed for c in cfgs]), ("output_dir", [c.output_dir for c in cfgs])):
        if None in values or len(set(values)) < len(values):
            raise ConfigError(key, values, f"a distinct {key} for every member of the array", COMMAND_LINE)
    if (why := why_not_fused(cfgs[0])) is not None:
        raise ConfigError("CONFIG", str(cfgs[0].output_dir), f"a config whose runs fuse (this one does not: {why}); "
                          "train its seeds with ablate train, one run each", COMMAND_LINE)


def train_array(cfgs: list[DictConfig], array_dir: Path | None = None) -> list[Path]:
    """Train the configs' runs as one seed array; returns their run directories (each with its ``result.json``).

    SIGINT and SIGTERM stop it at the end of a step, as they stop a solo run (:class:`SignalStop`): the array's
    checkpoint of that step saved, each member still training recorded interrupted at it.

    Raises:
        ConfigError: the configs are not members of one array, or one cannot run (before anything is written).
        RunFailed: the array failed as a whole (every member's result says why).
        Interrupted: SIGINT or SIGTERM stopped it, after each member's result.json recorded it (its ``command``
            resumes the array).
    """
    start = time.time()
    stop = SignalStop()
    stop.install()
    try:
        return _train_array(cfgs, array_dir, start, stop)
    finally:
        stop.uninstall()


def _train_array(cfgs: list[DictConfig], array_dir: Path | None, start: float, stop: SignalStop) -> list[Path]:
    check_members(cfgs)
    threads = use_threads(cfgs[0].trainer.threads)
    system = FusedSystem([OmegaConf.to_container(c, resolve=True, enum_to_str=True) for c in cfgs])
    tasks = [build_task(c) for c in cfgs]
    for cfg, task in zip(cfgs, tasks):
        check_settings(cfg, system.model.template, task)
    array_dir = Path(array_dir) if array_dir else array_dir_of(cfgs)
    finished = [c.output_dir for c in cfgs if _settled(Path(c.output_dir), c, (Status.FINISHED,))]
    if finished and len(finished) < len(cfgs) and not (array_dir / LAST_CHECKPOINT).is_file():
        # trained again in another array it would be another run (its dropout masks); resumed in its own array, the
        # checkpoint knows it ended, and it stays as it ended
        raise ConfigError("output_dir", str(finished[0]), "a run directory not yet trained to its end: this one is, "
                          "and an array trains its members together; leave it out", COMMAND_LINE)
    run_dirs = [make_run_dir(c)[0] for c in cfgs]  # a failed array keeps its members, each marked failed
    with ExitStack() as locks:
        for run_dir in run_dirs:
            locks.enter_context(run_lock(run_dir))
        if all(_settled(d, c) for d, c in zip(run_dirs, cfgs)):
            return run_dirs  # another process trained this array while we waited
        try:
            _fit(cfgs, system, MemberData(tasks, cfgs[0].data.pad_id), run_dirs, array_dir, start, threads, stop)
        except Interrupted as exc:
            exc.run_dir, exc.checkpoint = array_dir, array_dir / LAST_CHECKPOINT
            exc.command = array_resume_command(run_dirs, array_dir)
            raise
    return run_dirs


def _settled(run_dir: Path, cfg: DictConfig, statuses: tuple[str, ...] = SETTLED) -> bool:
    """Whether ``run_dir`` holds this config's run, ended (finished, failed or stopped; or as ``statuses`` say)."""
    result = read_result(run_dir) or {}
    return result.get("status") in statuses and result.get("config_hash") == config_hash(cfg)


def _fit(cfgs: list[DictConfig], system: FusedSystem, data: MemberData, run_dirs: list[Path], array_dir: Path,
         start: float, threads: str, stop: SignalStop) -> None:
    array_dir.mkdir(parents=True, exist_ok=True)
    stop.checkpoint = array_dir / LAST_CHECKPOINT
    _drop_cut_writes([array_dir / LAST_CHECKPOINT, array_dir / ARRAY_FILE,
                      *(d / name for d in run_dirs for name in MEMBER_FILES)])
    write_json(array_dir / ARRAY_FILE, {"members": [str(d) for d in run_dirs],
                                          "config_hashes": [config_hash(c) for c in cfgs]})
    last = array_dir / LAST_CHECKPOINT
    resume = last if last.is_file() else None
    # a member that failed or stopped before the array's first checkpoint trains again from step 0 with the others
    members = [_member(k, c, d, keep_ended=resume is not None) for k, (c, d) in enumerate(zip(cfgs, run_dirs))]
    attempt = Attempt(started_at=start, parameters=system.n_params, resumed_from=resume)
    fused = {"members": len(cfgs), "array": str(array_dir)}
    known: dict[str, Any] = {"trainer": None, "wall_time_s": None, "traceback": None}  # filled in as it trains

    def result(m: Member, book: Members | None = None) -> dict[str, Any]:
        return _result(m, attempt, fused, known, book)

    for m in _active(members):
        write_atomic(config_path(m.run_dir), OmegaConf.to_yaml(m.cfg))
        write_result(m.run_dir, result(m), merge=True)
    clock = WallClock(start)
    book = Members(members, every=cfgs[0].train.log_every,
                   record=lambda m: write_result(m.run_dir, result(m, book)),
                   keep=cfgs[0].train.keep_checkpoints, checkpoint_every=checkpoint_every(cfgs[0]))
    # val/bleu before the book: it logs the members' validation metrics at the same hook
    bleu = [MemberBleu()] if cfgs[0].train.val_bleu else []  # does nothing for tasks without references
    # a stop on a signal last: it saves the array's checkpoint once every other callback is done with the step
    callbacks = [clock, *bleu, book, ValidateAtLastStep(), ArrayResume(), stop]
    status, error = Status.INTERRUPTED, None
    try:
        last_only = last_checkpoint_callback(array_dir)  # the array's own last.ckpt, at every validation
        bar = progress(cfgs[0].train.log_every, cfgs[0].trainer.enable_progress_bar)  # lines off a terminal
        trainer = pl.Trainer(**trainer_settings(cfgs[0], array_dir, logger=False, plugins=[AtomicCheckpointIO()],
                                                callbacks=[last_only, *callbacks, *bar]))
        known["trainer"] = trainer
        kernel, _ = choose_attention_kernel(system.model.template, cfgs[0].trainer.attention_kernel,
                                            trainer.strategy.root_device)  # sdpa: an array does not fuse flex
        attempt = replace(attempt, attention_kernel=kernel)
        pin_attention_backends(trainer.strategy.root_device)
        for m in _active(members):
            log_parameters(m.loggers, system.n_params)
        print(threads, file=sys.stderr)
        trainer.fit(system, datamodule=data, ckpt_path=str(resume) if resume else None)
        status = Status.INTERRUPTED if trainer.interrupted else Status.FINISHED
    except Interrupted as exc:  # before training started (once it has, the book recorded it: Members.on_exception)
        for m in _active(members):
            if m.status == Status.RUNNING:
                m.error, m.interrupted_by = exc.error, exc.name
        raise
    except Exception as exc:
        status, error = Status.FAILED, failure(exc)
        known["traceback"] = trace()
        # the members still running record it in their result.json (below); the array's own folder holds none
        failing = [m for m in _active(members) if m.status == Status.RUNNING] or _active(members)
        raise RunFailed(failing[0].run_dir, error, others=len(failing) - 1) from exc
    finally:
        known["wall_time_s"] = clock.seconds
        for m in _active(members):
            if m.status == Status.RUNNING:
                m.status, m.error = status, m.error or error
                m.step = getattr(system, "global_step", m.step) if status != Status.FAILED else m.step
            write_result(m.run_dir, result(m, book))
            for logger in m.loggers:
                logger.finalize(m.status)


# what an array writes in each member's folder (:mod:`ablate.train.members`)
MEMBER_FILES = (f"{CHECKPOINTS_DIR}/{LAST_CHECKPOINT}", f"{CHECKPOINTS_DIR}/{BEST_CHECKPOINT}", RESULT_FILE,
                PROGRESS_FILE, CONFIG_FILE)


def _drop_cut_writes(paths: list[Path]) -> None:
    """Remove the temporary files an attempt killed while writing ``paths`` left beside them (their writers held the
    members' locks, which this attempt holds now: no writer is left)."""
    for path in paths:
        if path.parent.is_dir():
            for entry in path.parent.iterdir():
                if being_written(path, entry):
                    entry.unlink(missing_ok=True)


def _member(index: int, cfg: DictConfig, run_dir: Path, keep_ended: bool) -> Member:
    """Member ``index``: running, with its loggers; or, when it ended in the earlier attempt of this array that
    ``keep_ended`` resumes (failed or stopped alone, the array then killed), as it ended, its record left as it is."""
    result = read_result(run_dir) or {}
    if keep_ended and _settled(run_dir, cfg):
        return Member(index, run_dir, cfg, [], status=Status(result["status"]), error=result.get("error"),
                      stopped_because=result.get("stopped_because"), step=result.get("step", 0), ended_before=True)
    return Member(index, run_dir, cfg, make_loggers(cfg, run_dir, beside_others=True))


def _active(members: list[Member]) -> list[Member]:
    """The members this attempt trains (and records)."""
    return [m for m in members if not m.ended_before]


def _result(m: Member, attempt: Attempt, fused: dict[str, Any], known: dict[str, Any],
            book: Members | None = None) -> dict[str, Any]:
    """Member ``m``'s ``result.json`` (:func:`ablate.train.record.run_result`, as a solo run's), with ``fused``;
    ``known``: the array's trainer, wall time and traceback, once there are; ``book``: what the array's callback
    knows of the member (None: it is only starting, ``running``)."""
    outcome = None
    if book is not None:
        outcome = Outcome(m.status, step=m.step, final=m.final, best=m.best.value, train_tokens=m.tokens,
                          tokens_per_s=tokens_per_s(m.tokens, book.train_seconds),
                          wall_time_s=known["wall_time_s"], resumed_exactly=True,  # ArrayResume restores every position
                          error=m.error, traceback=m.traceback or known["traceback"],
                          stopped_because=m.stopped_because, interrupted_by=m.interrupted_by)
    return run_result(m.cfg, m.run_dir, known["trainer"], attempt, outcome, fused={**fused, "index": m.index})
