"""Checks that need more than the schema's types: sizes, ranges, combinations, registry names."""

from __future__ import annotations

import math
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.errors import ConfigError, check_name


# Upper bounds on sizes, counts and steps: past them a run cannot be built or finished on any machine (a typo's extra
# zeros, `model.n_layers=10000000` building layers until killed), far past the largest models and runs in the papers.
MAX_SIZE = {
    "model.n_layers": 1_000, "model.n_encoder_layers": 1_000, "model.n_decoder_layers": 1_000,  # DeepNet: 1,000
    "model.d_model": 65_536, "model.n_heads": 4_096, "model.d_k": 65_536, "model.d_v": 65_536, "model.d_ff": 1 << 20,
    "data.vocab_size": 1 << 22, "data.batch_size": 1 << 24, "data.max_tokens": 1 << 30, "data.max_len": 1 << 20,
    "data.limit_train": 1 << 40, "data.limit_val": 1 << 40,
    "train.max_steps": 1_000_000_000, "train.val_every": 1_000_000_000, "train.log_every": 1_000_000_000,
}


def _positive(cfg: DictConfig, key: str) -> None:
    value = OmegaConf.select(cfg, key)
    if value is not None and not 0 < value <= MAX_SIZE[key]:
        raise ConfigError(key, value, f"a positive integer up to {MAX_SIZE[key]:,}")


def _fraction(cfg: DictConfig, key: str) -> None:
    value = OmegaConf.select(cfg, key)
    if not 0.0 <= value < 1.0:
        raise ConfigError(key, value, "a number in [0, 1)")


def _number(cfg: DictConfig, key: str, allowed: str, ok: Callable[[float], bool], *, optional: bool = False) -> None:
    """A finite number that ``ok`` accepts (None too, when ``optional``)."""
    value = OmegaConf.select(cfg, key)
    if value is None and optional:
        return
    if value is None or not math.isfinite(value) or not ok(value):
        raise ConfigError(key, value, allowed + (" or null" if optional else ""))


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError for the first value that cannot be used.

    Raises:
        ConfigError: with the dotted key, the value and what is allowed.
    """
    check_name(cfg.name, "name")
    m = cfg.model
    for key in ("n_layers", "n_encoder_layers", "n_decoder_layers", "d_model", "n_heads", "d_k", "d_v", "d_ff"):
        _positive(cfg, f"model.{key}")
    for key in ("vocab_size", "batch_size", "max_tokens", "max_len", "limit_train", "limit_val"):
        _positive(cfg, f"data.{key}")
    for key in ("max_steps", "val_every", "log_every"):
        _positive(cfg, f"train.{key}")
    _fraction(cfg, "model.dropout")
    _fraction(cfg, "model.attention_dropout")
    _fraction(cfg, "train.label_smoothing")
    for key in ("d_k", "d_v"):
        if m[key] is None and m.d_model % m.n_heads != 0:
            raise ConfigError(
                "model.n_heads",
                m.n_heads,
                f"a divisor of model.d_model={m.d_model} (or set model.{key} explicitly)",
            )
    special = {"data.pad_id": cfg.data.pad_id, "data.bos_id": cfg.data.bos_id, "data.eos_id": cfg.data.eos_id}
    for key, value in special.items():
        if not 0 <= value < cfg.data.vocab_size:
            raise ConfigError(key, value, f"an id in [0, data.vocab_size={cfg.data.vocab_size})")
    if len(set(special.values())) != len(special):
        raise ConfigError("data.pad_id", cfg.data.pad_id, "pad, bos and eos ids that differ from each other")
    if len(cfg.train.betas) != 2 or not all(0.0 <= b < 1.0 for b in cfg.train.betas):
        raise ConfigError("train.betas", list(cfg.train.betas), "two numbers in [0, 1)")
    if cfg.train.keep_checkpoints < 0:
        raise ConfigError("train.keep_checkpoints", cfg.train.keep_checkpoints, "a non-negative integer")
    if cfg.train.checkpoint_every is not None and cfg.train.checkpoint_every < 1:
        raise ConfigError("train.checkpoint_every", cfg.train.checkpoint_every,
                          "a positive integer, or null for val_every")
    _number(cfg, "train.grad_clip", "a positive, finite number", lambda v: v > 0, optional=True)
    _number(cfg, "train.lr", "a positive, finite learning rate", lambda v: v > 0,
            optional=True)
    _number(cfg, "train.eps", "a positive, finite epsilon", lambda v: v > 0)
    _number(cfg, "train.weight_decay", "a non-negative, finite weight decay", lambda v: v >= 0)
    if not 0 <= cfg.seed < 2**32:
        raise ConfigError("seed", cfg.seed, "an integer in [0, 2**32): what numpy and torch accept as a seed")
    if cfg.trainer.accumulate_grad_batches < 1:
        raise ConfigError("trainer.accumulate_grad_batches", cfg.trainer.accumulate_grad_batches, "a positive integer")
    limit = cfg.trainer.limit_val_batches
    if limit is not None and not (math.isfinite(limit)
                                  and (0 < limit <= 1 or (limit > 1 and float(limit).is_integer()))):
        raise ConfigError("trainer.limit_val_batches", limit, "a fraction in (0, 1], a whole number of batches, or "
                          "null (every batch)")
    if cfg.trainer.num_sanity_val_steps < -1:
        raise ConfigError("trainer.num_sanity_val_steps", cfg.trainer.num_sanity_val_steps, "-1 (all) or more")
    if cfg.trainer.extra:
        _check_trainer_extra(OmegaConf.to_container(cfg.trainer.extra))
    for kind in registry.kinds().values():  # every declared kind, built-in or the user's
        name = OmegaConf.select(cfg, kind.key)
        registry.get(kind.name, name, key=kind.key)
        args = OmegaConf.to_container(OmegaConf.select(cfg, kind.args_key), resolve=True)
        registry.check_args(kind.name, name, args, key=kind.args_key)


# Trainer arguments ablate sets from its own keys; trainer.extra may not set them again.
SET_BY_ABLATE = {"accelerator": "trainer.accelerator", "devices": "trainer.devices", "strategy": "trainer.strategy",
                 "precision": "trainer.precision", "max_steps": "train.max_steps", "max_epochs": "train.max_steps",
                 "val_check_interval": "train.val_every", "check_val_every_n_epoch": "train.val_every",
                 "log_every_n_steps": "train.log_every", "gradient_clip_val": "train.grad_clip",
                 "accumulate_grad_batches": "trainer.accumulate_grad_batches",
                 "limit_val_batches": "trainer.limit_val_batches",
                 "num_sanity_val_steps": "trainer.num_sanity_val_steps",
                 "deterministic": "trainer.deterministic", "enable_progress_bar": "trainer.enable_progress_bar",
                 "default_root_dir": "output_dir", "logger": "logger", "callbacks": "ablate's callbacks",
                 "plugins": "ablate's checkpointing", "use_distributed_sampler": "the task"}


def _check_trainer_extra(extra: dict) -> None:
    """``trainer.extra`` names arguments of ``pytorch_lightning.Trainer`` that ablate does not set itself."""
    import difflib
    import inspect

    from pytorch_lightning import Trainer  # only when trainer.extra is used: Lightning is slow to import

    accepted = [p for p in inspect.signature(Trainer.__init__).parameters if p != "self"]
    for name in extra:
        if name in SET_BY_ABLATE:
            raise ConfigError(f"trainer.extra.{name}", extra[name], f"an argument ablate does not set: use "
                              f"{SET_BY_ABLATE[name]} instead")
        if name not in accepted:
            close = difflib.get_close_matches(name, accepted, n=1)
            hint = "" if not close else (f" (did you mean {SET_BY_ABLATE[close[0]]}?)" if close[0] in SET_BY_ABLATE
                                         else f" (did you mean {close[0]!r}?)")
            free = [p for p in accepted if p not in SET_BY_ABLATE]
            raise ConfigError(f"trainer.extra.{name}", extra[name],
                              f"an argument of pytorch_lightning.Trainer: {', '.join(free)}{hint}")
