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
VAL_BLEU = "train.val_bleu"  # read by a task that decodes its validation split against references


def why_not_fused(cfg: DictConfig) -> str | None:
    """Why the runs of a resolved run config cannot train as a seed array; None when they can.

    Returns:
        The first reason, one line: a chosen variant that declares ``not_fusable`` (``"ffn 'moe': <its reason>"``,
        kinds in declaration order), else a setting of the run (``"trainer.precision=16-mixed: ..."``).
    """
    chosen = []
    for kind in registry.kinds().values():
        name = OmegaConf.select(cfg, kind.key)
        entry = registry.get(kind.name, name, key=kind.key)
        if entry.not_fusable:
            return f"{kind.name} {name!r}: {entry.not_fusable}"
        chosen.append(entry)
    return _setting_reason(cfg, decodes=any(VAL_BLEU in entry.reads() for entry in chosen))


def _setting_reason(cfg: DictConfig, *, decodes: bool) -> str | None:
    """The first setting of the run that a seed array cannot honour for each member apart; None: none.
    ``decodes``: a chosen variant (the task) reads ``train.val_bleu``, i.e. decodes against references."""
    trainer, train = cfg.trainer, cfg.train
    precision = str(trainer.precision)
    if precision.startswith("16"):  # "16-mixed", "16-true" and Lightning's older "16"
        return f"trainer.precision={precision}: fp16's one loss scaler would be shared by the members"
    if _several_devices(trainer.devices):
        return f"trainer.devices={trainer.devices}: an array trains in one process, on one device"
    if str(trainer.strategy) not in ONE_PROCESS:
        return f"trainer.strategy={trainer.strategy}: an array trains in one process, on one device"
    if train.keep_checkpoints > 0:
        return f"train.keep_checkpoints={train.keep_checkpoints}: step checkpoints are kept per run, not per array"
    if train.val_bleu and decodes:
        return f"train.val_bleu=true with task {cfg.data.task!r}: decoding the validation split per member is not fused"
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
