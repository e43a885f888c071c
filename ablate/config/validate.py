"""Checks that need more than the schema's types: each key's range (declared beside its type in the schema), then
combinations, registry names and Lightning's own arguments."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.config.schema import RunConfig
from ablate.errors import ConfigError, check_name


def _ranges(schema: type, node: DictConfig, prefix: str = "") -> None:
    """Check every key whose schema field declares a :class:`~ablate.config.schema.Range`, section by section."""
    for f in dataclasses.fields(schema):
        if dataclasses.is_dataclass(f.default_factory):  # a section: RunConfig.model -> ModelConfig
            _ranges(f.default_factory, node[f.name], f"{prefix}{f.name}.")
        elif (rng := f.metadata.get("range")) is not None and not rng.accepts(node[f.name]):
            raise ConfigError(f"{prefix}{f.name}", node[f.name], rng.allowed)


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError for the first value that cannot be used.

    Raises:
        ConfigError: with the dotted key, the value and what is allowed.
    """
    check_name(cfg.name, "name")
    _ranges(RunConfig, cfg)
    m = cfg.model
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
