"""Whether a run config's seeds can train as one fused model (a seed array, :mod:`ablate.train.fused`), and if not,
why, in one line (for the dry run's plan and the array's refusal).

A reason comes from one of two places. A chosen variant declares it when it is registered
(``register(..., not_fusable="...")``); ``tests/train/test_fusable.py``, generated from the registry, checks that
every other variant fuses with each member equal to its solo model, and that every declared one really does not.
Or the run asks for something one fused process cannot do for each member apart: the settings below.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from ablate import registry

ONE_PROCESS = ("auto", "single_device")  # Lightning strategies that train in this process, on one device


def why_not_fused(cfg: DictConfig) -> str | None:
    """Why the runs of a resolved run config cannot train as a seed array; None when they can.

    Returns:
        The first reason, one line: a chosen variant that declares ``not_fusable`` (``"ffn 'moe': <its reason>"``,
        kinds in declaration order), else a setting of the run (``"trainer.precision=16-mixed: ..."``).
    """
    for kind in registry.kinds().values():
        name = OmegaConf.select(cfg, kind.key)
        entry = registry.get(kind.name, name, key=kind.key)
        if entry.not_fusable:
            return f"{kind.name} {name!r}: {entry.not_fusable}"
    return _setting_reason(cfg)


def _setting_reason(cfg: DictConfig) -> str | None:
    """The first setting of the run that a seed array cannot honour for each member apart; None: none. (Step
    checkpoints and val/bleu it keeps for each member: :mod:`ablate.train.members`,
    :class:`ablate.train.validation_bleu.MemberBleu`.)"""
    trainer = cfg.trainer
    precision = str(trainer.precision)
    if precision.startswith("16"):  # "16-mixed", "16-true" and Lightning's older "16"
        return f"trainer.precision={precision}: fp16's one loss scaler would be shared by the members"
    if _several_devices(trainer.devices):
        return f"trainer.devices={trainer.devices}: an array trains in one process, on one device"
    if str(trainer.strategy) not in ONE_PROCESS:
        return f"trainer.strategy={trainer.strategy}: an array trains in one process, on one device"
    if trainer.compile:
        return "trainer.compile=true: a seed array's step is not compiled, so the runs would not be what they say"
    if trainer.get("attention_kernel", "sdpa") != "sdpa":  # a str Enum: equal to its value
        return ("trainer.attention_kernel=flex: a seed array's step runs SDPA, so the runs would not be what they "
                "say")
    return None


def _several_devices(devices: Any) -> bool:
    """Whether Lightning's ``devices`` asks for more than one: a count above 1, -1 (all), or a list of several.
    ``auto`` counts as one: ablate's sweep gives each worker one device (``CUDA_VISIBLE_DEVICES``)."""
    if isinstance(devices, (list, tuple, ListConfig)):
        return len(devices) > 1
    text = str(devices).strip()
    if text == "auto":
        return False
    if "," in text:  # "0,1": device indices
        return len([part for part in text.split(",") if part.strip()]) > 1
    return int(text) > 1 or int(text) == -1
