"""Before a run writes anything: every setting it will use is checked, and its run directory is one it may use.

- Whether the model fits the machine at all (:func:`check_memory`, before it is built).
- Settings only the libraries know: Lightning's own checks of ``trainer.*`` (a throwaway Trainer), the schedule's
  arguments, W&B's mode and its credentials, and positions the model cannot encode for the task's longest training
  sequence.
- The run directory: a new folder or a run's (:mod:`ablate.runs.owner`), writable, holding no run of another config
  (resuming under another would relabel steps trained one way as trained another), and whose last checkpoint, if
  any, can be read.

Each refusal is a :class:`ablate.errors.ConfigError`: one line, exit code 2, nothing written. What fails after the
checks but before training starts (a Trainer Lightning cannot make, a failure while fit sets up) leaves no half-made
folder either (:func:`discard`: a folder the command made is removed). A run that started training is an outcome: its
folder stays, with its ``config.yaml``, ``train.log`` and a ``result.json`` that says ``failed``, the step and why.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import time
import zipfile
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from ablate.config.schema import Logger as LoggerKind
from ablate.errors import ConfigError
from ablate.model.inspect import too_long
from ablate.runs.files import (CHECKPOINT_SUFFIX, checkpoints_dir, config_changes, config_hash, config_path,
                               last_checkpoint, read_result, read_run_config, result_path, resume_command)
from ablate.runs.owner import check_folder, claim
from ablate.runs.status import SETTLED, Status
from ablate.train.logs import drop_adverts
from ablate.train.system import build_schedule

drop_adverts()  # the Trainers built here are a launcher's (on a Slurm login node: no srun advice)

TRAINER_KEYS = ("accelerator", "devices", "strategy", "precision")
# What training holds per parameter at the very least, whatever the precision and optimiser: a 16-bit weight and its
# 16-bit gradient (fp32 weights and Adam's moments take 16 bytes: sweep/memory.py). A model past the memory of the
# device it trains on at this rate cannot start on any setting; building it would take that memory first.
LEAST_BYTES_PER_PARAMETER = 4
SHARDING = ("fsdp", "deepspeed")  # strategies that split the weights over devices: each holds a part


def device_memory(accelerator: str) -> tuple[int, str] | None:
    """The memory of the device a run trains on, in bytes, and its name: the first CUDA GPU's for a GPU accelerator
    (``auto`` when there is one), this machine's RAM for the CPU; None when it cannot say (another accelerator)."""
    from ablate.train.precision import GPU_ACCELERATORS

    if str(accelerator) in GPU_ACCELERATORS and torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory, f"the GPU ({torch.cuda.get_device_name(0)})"
    if str(accelerator) in ("auto", "cpu"):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's memory"
        except (ValueError, OSError, AttributeError):  # not a POSIX system that says
            return None
    return None


def check_memory(cfg: DictConfig) -> None:
    """A model too large for the device it would train on, counted on the meta device (nothing allocated).

    Raises:
        ConfigError: its parameters at :data:`LEAST_BYTES_PER_PARAMETER` exceed the device's whole memory.
    """
    from ablate.model.meta import build_on_meta

    if any(name in str(cfg.trainer.strategy) for name in SHARDING) or (memory := device_memory(
            cfg.trainer.accelerator)) is None:
        return
    have, where = memory
    n = sum(p.numel() for p in build_on_meta(cfg).parameters())
    if n * LEAST_BYTES_PER_PARAMETER > have:
        raise ConfigError("model", f"{n:,} parameters", f"a model that fits in {where}: {have / 2**30:,.1f} GiB holds "
                          f"at most {have // LEAST_BYTES_PER_PARAMETER:,} parameters while training (a 16-bit weight "
                          f"and its gradient each, {LEAST_BYTES_PER_PARAMETER} bytes); this one needs "
                          f"{n * LEAST_BYTES_PER_PARAMETER / 2**30:,.1f} GiB")


def check_config(cfg: DictConfig) -> None:
    """The settings a run uses that the config schema cannot check alone, and that need neither its model nor its
    data: what a sweep checks for every run before it writes its folder (:mod:`ablate.sweep.plan`).

    Raises:
        ConfigError: the first one that cannot be used.
    """
    check_trainer(cfg)
    build_schedule(cfg)  # a schedule refuses its arguments when it is made: here, not at the first step
    if cfg.logger == LoggerKind.wandb:  # WANDB_MODE=bogus: refused here, not once the run directory exists
        from ablate.runs.wandb import check_credentials

        check_credentials(cfg.wandb.mode)


def check_settings(cfg: DictConfig, model: nn.Module, data: Any) -> None:
    """The settings a run uses that the config schema cannot check alone (:func:`check_config`), and positions the
    model cannot encode for the task's longest training sequence.

    Raises:
        ConfigError: the first one that cannot be used.
    """
    check_config(cfg)
    if (why := too_long(model, data.longest)) is not None:
        raise ConfigError("data.max_len", cfg.data.max_len, f"sequences the model can encode: training gives it up to "
                          f"{data.longest} tokens, and {why} (raise its max_len, or lower data.max_len)")


def check_trainer(cfg: DictConfig) -> None:
    """Lightning's own checks of the trainer settings, run on a throwaway Trainer.

    Raises:
        ConfigError: Lightning refused them; the key is the setting its message names.
    """
    from ablate.train.precision import run_precision

    t = cfg.trainer
    quiet = logging.getLogger("pytorch_lightning")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "GPU available: ..." lines belong to the real Trainer (setLevel: not .level=,
    # which would leave logging's per-logger cache saying INFO is off after the level is back)
    try:
        pl.Trainer(accelerator=t.accelerator, devices=t.devices, strategy=t.strategy,
                   precision=run_precision(cfg), logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False, max_steps=1,
                   **{k: v for k, v in OmegaConf.to_container(t.extra, resolve=True).items() if k != "callbacks"})
    except Exception as exc:  # MisconfigurationException, ValueError, TypeError: whatever Lightning raises
        message = " ".join(str(exc).split())
        keys = [*(f"extra.{k}" for k in t.extra), *TRAINER_KEYS]
        key = next((k for k in keys if f"{k.split('.')[-1]}=" in message), None) or \
            next((k for k in keys if k.split(".")[-1] in message), None)
        value = OmegaConf.select(cfg, f"trainer.{key}") if key else {k: t[k] for k in TRAINER_KEYS}
        raise ConfigError(f"trainer.{key}" if key else "trainer", value,
                          f"a setting pytorch_lightning.Trainer accepts (it said: {message})") from None
    finally:
        quiet.setLevel(level)


def make_run_dir(cfg: DictConfig) -> tuple[Path, Path | None]:
    """The run directory, checked and then created (with its marker, :mod:`ablate.runs.owner`): ``output_dir``, or a
    new ``runs/<name>/<time>-<hash>`` (a suffix when another process made that one in the same second).

    Returns:
        The run directory, and the outermost folder this call created for it (None when it existed): what
        :func:`discard` removes.

    Raises:
        ConfigError: it cannot be a folder of this run (:func:`ablate.runs.owner.check_folder`,
            :func:`check_run_dir`), or cannot be created; nothing is written then.
    """
    if cfg.output_dir:
        run_dir = Path(cfg.output_dir)
        check_folder(run_dir, "run", None, key="output_dir", source=None)
        check_run_dir(run_dir, cfg, previous_result(run_dir))
        made = _outermost_missing(run_dir)
        claim(run_dir, "run", None, key="output_dir", source=None)
    else:
        stem = Path("runs") / cfg.name / f"{time.strftime('%Y%m%d-%H%M%S')}-{config_hash(cfg)[:6]}"
        run_dir, k = stem, 1
        check_folder(stem, "run", None, key="output_dir", source=None)  # runs/ a file, or this folder inside a run's
        while (made := _outermost_missing(run_dir)) is None or not _mkdir(run_dir):
            k += 1
            run_dir = stem.with_name(f"{stem.name}-{k}")
        claim(run_dir, "run", None, key="output_dir", source=None)
    return run_dir, made


def previous_result(run_dir: Path) -> dict[str, Any]:
    """The ``result.json`` an earlier attempt left in ``run_dir`` ({} when there is none).

    Raises:
        ConfigError: it cannot be read (cut short, edited, not ablate's): never taken for a result, naming the file
            and how to train past it (the run resumes from its last checkpoint, which holds its final values, and
            records the same result again).
    """
    try:
        return read_result(run_dir) or {}
    except ConfigError as err:
        path = result_path(run_dir)
        then = ("resumes from its last checkpoint and records its result again"
                if last_checkpoint(run_dir).is_file() else "trains from its first step")
        raise ConfigError(err.key, err.value, f"{err.allowed}; remove it (rm {shlex.quote(str(path))}) and run this "
                          f"command again: the run {then}", err.source) from None


def _outermost_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist (not even as a dangling link); None if
    ``path`` exists."""
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    return missing[-1] if missing else None


def discard(run_dir: Path, made: Path | None) -> bool:
    """Remove the folder of a run that failed or was interrupted before training started, when this command made it
    (``made``: :func:`make_run_dir`'s; a checkpoint in it, which no such run has, keeps it): the place is then as it
    was before the command, folders made for it included (those another process has since written in stay). Call it
    while the run's lock is held, and only for a run that has not started training: one that has is an outcome.

    Returns:
        Whether it was removed; False leaves it as it is, for its ``result.json`` to say why the run failed.
    """
    if made is None or any(checkpoints_dir(run_dir).glob(f"*{CHECKPOINT_SUFFIX}")):
        return False
    shutil.rmtree(run_dir)
    for parent in run_dir.parents:
        if parent == made.parent:
            break
        try:
            parent.rmdir()
        except OSError:  # not empty: another run's folder is in it
            break
    return True


def _mkdir(path: Path) -> bool:
    """Create ``path`` (and its parents); False when it exists already."""
    try:
        path.mkdir(parents=True, exist_ok=False)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        raise ConfigError("output_dir", str(path), f"a folder ablate can create ({exc.strerror})") from None


def check_run_dir(run_dir: Path, cfg: DictConfig, previous: dict[str, Any]) -> None:
    """The run directory holds this config's run (or none yet) and a readable last checkpoint (or none).

    Raises:
        ConfigError: it holds a run of another config, naming the keys that differ; or its last checkpoint is
            truncated or not a checkpoint, naming the file.
    """
    old_path = config_path(run_dir)
    old = read_run_config(run_dir) if old_path.is_file() else None
    trained = previous.get("config_hash") or (old is not None and checkpoints_dir(run_dir).is_dir()
                                               and config_hash(old))
    if trained and trained != config_hash(cfg):
        changes = config_changes(old, cfg) if old is not None and config_hash(old) == trained else []
        what = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "") if changes \
            else f"config hash {trained}, this one {config_hash(cfg)}"
        if previous.get("status") == Status.FINISHED or old is None or config_hash(old) != trained:
            then = "give another output_dir for this one"  # nothing to resume, or no config.yaml to resume it with
        else:
            then = f"give another output_dir for this one, or resume that run with: {resume_command(run_dir)}"
        ended = "finished run" if previous.get("status") == Status.FINISHED else "run"
        raise ConfigError("output_dir", str(run_dir), f"a run directory of this config or a new one: it holds a "
                          f"{ended} of another config ({what}); {then}")
    last = last_checkpoint(run_dir)
    if last.exists() and not last.is_file():
        raise ConfigError("checkpoint", str(last), "a checkpoint to resume from (this is a folder): remove it to train "
                          f"the run from its first step (rm -r {shlex.quote(str(last))}), then run this command again")
    if last.is_file() and not zipfile.is_zipfile(last):  # torch.save writes a zip archive; a cut one has no index
        raise ConfigError("checkpoint", str(last), "a checkpoint to resume from (this one is truncated or not a "
                          f"checkpoint): remove it to train the run from its first step (rm {shlex.quote(str(last))}), "
                          "then run this command again")


def check_not_an_array_member(run_dir: Path, previous: dict[str, Any]) -> None:
    """A seed array's member that has not ended resumes in its array alone: its ``last.ckpt`` holds its weights, not
    the array's optimiser, loop and random states (those are in the array's own checkpoint).

    Raises:
        ConfigError: ``previous`` (its result.json) says it was fused, naming its array.
    """
    fused = previous.get("fused")
    if isinstance(fused, dict) and previous.get("status") not in SETTLED:
        raise ConfigError("output_dir", str(run_dir), "a run that trains alone: this one is a member of the seed "
                          f"array {fused.get('array')}, which resumes it (relaunch its sweep with the same command)")
