"""Before a run writes anything: every setting it will use is checked, and its run directory is one it may use.

- Settings only the libraries know: Lightning's own checks of ``trainer.*`` (a throwaway Trainer), W&B's mode,
  and positions the model cannot encode for the task's longest training sequence.
- The run directory: a folder (not a file), writable, holding no run of another config (resuming under another
  would relabel steps trained one way as trained another), and whose last checkpoint, if any, can be read.

Each refusal is a :class:`ablate.errors.ConfigError`: one line, exit code 2, nothing written.
"""

from __future__ import annotations

import logging
import os
import time
import zipfile
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf
from torch import nn

from ablate.config.schema import Logger as LoggerKind
from ablate.errors import ConfigError
from ablate.model.inspect import too_long
from ablate.runs.files import config_changes, config_hash

TRAINER_KEYS = ("accelerator", "devices", "strategy", "precision")


def check_settings(cfg: DictConfig, model: nn.Module, data: Any) -> None:
    """The settings a run uses that the config schema cannot check alone.

    Raises:
        ConfigError: the first one that cannot be used.
    """
    check_trainer(cfg)
    if cfg.logger == LoggerKind.wandb:  # WANDB_MODE=bogus: refused here, not once the run directory exists
        from ablate.runs.wandb import resolve_mode

        resolve_mode(cfg.wandb.mode)
    if (why := too_long(model, data.longest)) is not None:
        raise ConfigError("data.max_len", cfg.data.max_len, f"sequences the model can encode: training gives it up to "
                          f"{data.longest} tokens, and {why} (raise its max_len, or lower data.max_len)")


def check_trainer(cfg: DictConfig) -> None:
    """Lightning's own checks of the trainer settings, run on a throwaway Trainer.

    Raises:
        ConfigError: Lightning refused them; the key is the setting its message names.
    """
    from ablate.train.precision import resolve_precision

    t = cfg.trainer
    quiet = logging.getLogger("pytorch_lightning")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "GPU available: ..." lines belong to the real Trainer (setLevel: not .level=,
    # which would leave logging's per-logger cache saying INFO is off after the level is back)
    try:
        pl.Trainer(accelerator=t.accelerator, devices=t.devices, strategy=t.strategy,
                   precision=resolve_precision(t.precision, t.accelerator), logger=False, enable_checkpointing=False,
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


def make_run_dir(cfg: DictConfig) -> Path:
    """The run directory, created: ``output_dir``, or a new ``runs/<name>/<time>-<hash>`` (a suffix when another
    process made that one in the same second).

    Raises:
        ConfigError: it cannot be a folder ablate writes in.
    """
    if cfg.output_dir:
        run_dir = Path(cfg.output_dir)
        if run_dir.exists() and not run_dir.is_dir():
            raise ConfigError("output_dir", str(run_dir), "a folder (this is a file)")
        _mkdir(run_dir, exist_ok=True)
    else:
        stem = Path("runs") / cfg.name / f"{time.strftime('%Y%m%d-%H%M%S')}-{config_hash(cfg)[:6]}"
        run_dir, k = stem, 1
        while not _mkdir(run_dir, exist_ok=False):
            k += 1
            run_dir = stem.with_name(f"{stem.name}-{k}")
    if not os.access(run_dir, os.W_OK):
        raise ConfigError("output_dir", str(run_dir), "a folder ablate can write in (this one is read-only)")
    return run_dir


def _mkdir(path: Path, *, exist_ok: bool) -> bool:
    """Create ``path`` (and its parents); False when it exists and ``exist_ok`` is False."""
    try:
        path.mkdir(parents=True, exist_ok=exist_ok)
        return True
    except FileExistsError:
        if exist_ok:  # a file where a parent folder should be
            raise ConfigError("output_dir", str(path), "a folder whose parents are folders") from None
        return False
    except OSError as exc:
        raise ConfigError("output_dir", str(path), f"a folder ablate can create ({exc.strerror})") from None


def check_run_dir(run_dir: Path, cfg: DictConfig, previous: dict[str, Any]) -> None:
    """The run directory holds this config's run (or none yet) and a readable last checkpoint (or none).

    Raises:
        ConfigError: it holds a run of another config, naming the keys that differ; or its last checkpoint is
            truncated or not a checkpoint, naming the file.
    """
    old_path = run_dir / "config.yaml"
    old = OmegaConf.load(old_path) if old_path.is_file() else None
    trained = previous.get("config_hash") or (old is not None and (run_dir / "checkpoints").is_dir() and config_hash(old))
    if trained and trained != config_hash(cfg):
        changes = config_changes(old, cfg) if old is not None and config_hash(old) == trained else []
        what = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "") if changes \
            else f"config hash {trained}, this one {config_hash(cfg)}"
        raise ConfigError("output_dir", str(run_dir), f"a run directory of this config or a new one: it holds a run "
                          f"of another config ({what}); resume it with {old_path}, or give another output_dir")
    last = run_dir / "checkpoints" / "last.ckpt"
    if last.is_file() and not zipfile.is_zipfile(last):  # torch.save writes a zip archive; a cut one has no index
        raise ConfigError("checkpoint", str(last), "a checkpoint to resume from (this one is truncated or not a "
                          "checkpoint): delete it to train the run from its first step")
