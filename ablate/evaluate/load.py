"""A trained run, read back from its directory: its config, its model with a checkpoint's (or an
average's) weights, and its data module (for the tokenizer and the references)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig
from torch import nn

from ablate.config import load_config
from ablate.config.schema import Arch
from ablate.data import build_task
from ablate.errors import COMMAND_LINE, ConfigError
from ablate.evaluate.average import average_checkpoints, last_checkpoints, load_state_dict
from ablate.model import build_model
from ablate.runs.files import (best_checkpoint, checkpoint_path, checkpoints_dir, config_path, last_checkpoint,
                               read_run_config)

MODEL_PREFIX = "model."  # TransformerSystem keeps the plain model as ``self.model``


def run_arch(run_dir: str | Path) -> str:
    """``encoder_decoder`` or ``decoder_only``: the architecture a run directory's config.yaml names.

    Raises:
        ConfigError: not a run directory.
    """
    path = config_path(run_dir)
    if not path.is_file():
        raise ConfigError("RUN_DIR", str(run_dir), "a run directory holding config.yaml", COMMAND_LINE)
    model = read_run_config(run_dir).get("model")
    return str(model.get("arch", "encoder_decoder")) if hasattr(model, "get") else "encoder_decoder"


def load_run_model(run_dir: str | Path, *, average_last: int = 0, checkpoint: str | None = None,
                   device: str | None = None) -> tuple[DictConfig, nn.Module, list[Path]]:
    """The run's config and its model in fp32 eval mode on ``device`` (default: CUDA when available, else
    the CPU), with the weights of ``checkpoints/<checkpoint>.ckpt``, or the average of the last
    ``average_last`` step checkpoints. ``checkpoint`` None: ``best``, else ``last`` (said on stderr).

    Returns:
        The config, the model, and the checkpoint files its weights come from.

    Raises:
        ConfigError: no config.yaml, a missing checkpoint, or too few step checkpoints.
    """
    run_dir = Path(run_dir)
    target = pick_device(device)  # a bad device is named before anything loads
    if not config_path(run_dir).is_file():
        raise ConfigError("RUN_DIR", str(run_dir), "a run directory holding config.yaml", COMMAND_LINE)
    cfg = load_config(config_path(run_dir))
    if average_last:
        paths = last_checkpoints(run_dir, average_last)
        state = average_checkpoints(paths)
    else:
        paths = [pick_checkpoint(run_dir, checkpoint)]
        state = load_state_dict(paths[0])
    model = build_model(cfg)
    try:
        model.load_state_dict({k[len(MODEL_PREFIX):]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)})
    except RuntimeError as exc:  # torch lists every mismatch on lines of its own: the first one says enough
        first = next((line.strip() for line in str(exc).splitlines()[1:] if line.strip()), str(exc).strip())
        raise ConfigError("checkpoint", str(paths[0]), f"weights that fit {config_path(run_dir)} (they do not: "
                          f"{first})") from None
    return cfg, model.float().eval().to(target), paths


def pick_checkpoint(run_dir: Path, checkpoint: str | None) -> Path:
    """``checkpoints/<checkpoint>.ckpt``; for None, ``best.ckpt``, else ``last.ckpt`` with a note on stderr (a run
    stopped before its first validation has no best).

    Raises:
        ConfigError: the checkpoint asked for, or both, missing.
    """
    folder = checkpoints_dir(run_dir)
    if checkpoint is None and not best_checkpoint(run_dir).is_file() and last_checkpoint(run_dir).is_file():
        print(f"ablate: note: {folder} has no best.ckpt (the run never validated): using last.ckpt", file=sys.stderr)
        checkpoint = "last"
    path = checkpoint_path(run_dir, checkpoint or "best")
    if not path.is_file():
        raise ConfigError("--checkpoint", checkpoint or "best", f"a checkpoint in {folder} (best, last)",
                          COMMAND_LINE)
    return path


def pick_device(device: str | None) -> torch.device:
    """``device`` (default: CUDA when available, else the CPU).

    Raises:
        ConfigError: not a device name, or a CUDA device this machine does not have.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        picked = torch.device(device)
    except (RuntimeError, ValueError):
        picked = None
    available = torch.cuda.device_count()
    if picked is None or picked.type not in ("cpu", "cuda") or (picked.type == "cuda" and (
            not available or (picked.index or 0) >= available)):
        have = f"cuda:0 .. cuda:{available - 1}" if available else "no CUDA device"
        raise ConfigError("--device", device, f"cpu, cuda or cuda:N (this machine: {have})", COMMAND_LINE)
    return picked


def run_task(cfg: DictConfig, run_dir: str | Path | None = None) -> pl.LightningDataModule:
    """The data module of a run on a text task, warning when its tokenizer had to be trained again (none cached):
    if that one differs from the run's, every id the model reads or writes means something else.

    Raises:
        ConfigError: the task has no tokenizer (``run_dir``, or the config's, is named).
    """
    return _with_tokenizer(build_task(cfg), cfg, run_dir)


def _with_tokenizer(data: pl.LightningDataModule, cfg: DictConfig, run_dir: str | Path | None):
    if not hasattr(data, "tokenizer"):
        raise ConfigError("RUN_DIR", str(run_dir or cfg.output_dir or f"runs/{cfg.name}"),
                          f"a run on a text task (parallel_text, text_lm): task {cfg.data.task!r} has no tokenizer, "
                          "so there is no text to score", COMMAND_LINE)
    if not data.tokenizer.from_cache:
        warnings.warn(f"the tokenizer was trained again (none cached under data.cache_dir={cfg.data.cache_dir}); "
                      "if it differs from the run's, the output is wrong", stacklevel=4)
    return data


def inspect_task(cfg: DictConfig, run_dir: str | Path) -> tuple[pl.LightningDataModule, Any]:
    """The data module of a run to inspect and its text: the tokenizer of a text task, or a synthetic task's
    symbols (:class:`ablate.data.symbols.Symbols`: ``"3 17 9"``).

    Raises:
        ConfigError: the task has neither.
    """
    data = build_task(cfg)
    if hasattr(data, "symbol_text"):
        return data, data.symbol_text
    return _with_tokenizer(data, cfg, run_dir), data.tokenizer


def encode(text_of: Any, text: str, option: str, model: nn.Module | None = None, *, added: int = 0) -> list[int]:
    """The ids of ``text`` (the value of ``option``, e.g. ``--prompt``) in a run's text.

    Args:
        model: when given, the ids (and ``added`` positions before them, e.g. the decoder's BOS) must be positions it
            can encode (a component's ``max_len``: learned positions).

    Raises:
        ConfigError: the text has no token, a word a synthetic task's symbols cannot read, or more tokens than the
            model has positions for.
    """
    from ablate.model.inspect import too_long

    try:
        ids = text_of.encode(" ".join(text.split()))
    except ValueError as exc:  # a synthetic task's symbols: the message says what they read
        raise ConfigError(option, text, str(exc), COMMAND_LINE) from None
    if not ids:
        raise ConfigError(option, text, "text with at least one token", COMMAND_LINE)
    if model is not None and (why := too_long(model, len(ids) + added)) is not None:
        raise ConfigError(option, text, f"text the run's model can encode: this is {len(ids)} tokens"
                          f"{f' and {added} more' if added else ''}, and {why}", COMMAND_LINE)
    return ids


def lm_window(ids: list[int], block: int, option: str) -> list[int]:
    """The last ``block`` (``data.max_len``) of a language model's input ``ids``: the positions it trained on, and
    what it conditions on as it samples past them. A longer input is cut to them, with a note on stderr saying so
    (a translation run's longer input is refused instead: :func:`encode`; a sentence cut short is another sentence).
    """
    if len(ids) > block:
        print(f"ablate: note: {option} is {len(ids)} tokens, more than the {block} the run's model reads at once "
              f"(data.max_len): it reads the last {block}", file=sys.stderr)
    return ids[-block:]


def translation_task(cfg: DictConfig) -> pl.LightningDataModule:
    """The data module of a translation run (one with references), as :func:`run_task`.

    Raises:
        ConfigError: the run is not an encoder-decoder on a translation task.
    """
    if cfg.model.arch != Arch.encoder_decoder:
        raise ConfigError("model.arch", str(cfg.model.arch.value), "encoder_decoder: a translation model")
    data = run_task(cfg)
    if not hasattr(data, "references"):
        raise ConfigError("data.task", cfg.data.task, "a translation task with references (e.g. parallel_text)")
    return data
