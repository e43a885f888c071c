"""The config schema: typed dataclasses that OmegaConf validates every YAML file against.

Defaults are the paper's base model (Vaswani et al. 2017, Table 3 "base" row and
section 5). The keys that choose components (``model.positional``, ``train.schedule``,
``data.task`` ... and their ``*_args``) are not written here: each declared kind adds
its own (:func:`run_schema`), with the paper's variant as the default, so a kind
declared in user code is configured like a built-in one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, List, Optional


@dataclass(frozen=True)
class Range:
    """What a numeric key accepts beyond its type. :func:`ablate.config.validate.validate` checks every key whose
    field carries one (``metadata["range"]``), and ``allowed`` is the error's "expected ..." in words."""

    allowed: str
    ok: Callable[[Any], bool]
    optional: bool = False  # null is accepted too

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        return math.isfinite(value) and self.ok(value)


def positive(upper: int, *, optional: bool = False) -> Range:
    """A positive integer up to ``upper``: past it a run cannot be built or finished on any machine (a typo's extra
    zeros, ``model.n_layers=10000000`` building layers until killed), far past the largest models and runs in the
    papers."""
    return Range(f"a positive integer up to {upper:,}", lambda v: 0 < v <= upper, optional)


FRACTION = Range("a number in [0, 1)", lambda v: 0.0 <= v < 1.0)
COUNT = Range("a positive integer", lambda v: v >= 1)
NON_NEGATIVE = Range("a non-negative integer", lambda v: v >= 0)
SEED = Range("an integer in [0, 2**32): what numpy and torch accept as a seed", lambda v: 0 <= v < 2**32)


def key(default: Any, range: Range) -> Any:
    """A schema field with its range: the key's type is its annotation, its range is here, checked in one place."""
    return field(default=default, metadata={"range": range})


class Arch(str, Enum):
    encoder_decoder = "encoder_decoder"
    decoder_only = "decoder_only"


class Logger(str, Enum):
    """Where metrics go besides the run directory's CSV log (always written)."""

    wandb = "wandb"
    none = "none"


class AttentionKernel(str, Enum):
    """What computes attention in training (ablate/train/kernels.py): the same attention either way."""

    sdpa = "sdpa"  # scaled_dot_product_attention over boolean masks
    flex = "flex"  # FlexAttention over block masks (compiled on CUDA); SDPA where it cannot serve the run


class WandbMode(str, Enum):
    auto = "auto"  # online when an API key is configured, offline otherwise
    online = "online"
    offline = "offline"
    disabled = "disabled"


@dataclass
class ModelConfig:
    """The architecture (section 3). Each kind adds ``<kind>: <variant>`` and ``<kind>_args`` here."""

    arch: Arch = Arch.encoder_decoder
    n_layers: int = key(6, positive(1_000))  # N, for both stacks unless one is set below
    n_encoder_layers: Optional[int] = key(None, positive(1_000, optional=True))
    n_decoder_layers: Optional[int] = key(None, positive(1_000, optional=True))
    d_model: int = key(512, positive(65_536))
    n_heads: int = key(8, positive(4_096))  # h
    d_k: Optional[int] = key(None, positive(65_536, optional=True))  # default d_model / h
    d_v: Optional[int] = key(None, positive(65_536, optional=True))  # default d_model / h
    d_ff: int = key(2048, positive(1 << 20))
    dropout: float = key(0.1, FRACTION)  # P_drop: embedding sums and every sub-layer output
    attention_dropout: float = key(0.0, FRACTION)  # on attention weights; the paper has none


@dataclass
class DataConfig:
    """Where the tokens come from. ``task`` (added by the kind) names a registered data module."""

    path: Optional[str] = None  # local folder / file, or a Hugging Face Hub dataset name
    src_lang: str = "en"
    tgt_lang: str = "de"
    vocab_size: int = key(32, positive(1 << 22))
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    batch_size: int = key(64, positive(1 << 24))  # sequences per batch, for tasks that batch by count
    max_tokens: int = key(4096, positive(1 << 30))  # tokens per batch (source or target, padding included)
    length_bucket: Optional[int] = None  # static shapes: pad training batches to multiples of this (off: paper's)
    max_len: int = key(256, positive(1 << 20))  # length filter (tokens) for training pairs; block size for LMs
    # use only the first N training examples
    limit_train: Optional[int] = key(None, positive(1 << 40, optional=True))
    limit_val: Optional[int] = key(None, positive(1 << 40, optional=True))
    cache_dir: Optional[str] = None  # tokenizer cache; default ~/.cache/ablate
    num_workers: int = 0


@dataclass
class TrainConfig:
    """Optimisation (section 5.3, 5.4). ``schedule`` and ``schedule_args`` are added by the kind."""

    max_steps: int = key(100_000, positive(1_000_000_000))
    label_smoothing: float = key(0.1, FRACTION)  # eps_ls
    # the peak lr; unset: noam's paper formula, 1e-3 for cosine and constant
    lr: Optional[float] = key(None, Range("a positive, finite learning rate or null", lambda v: v > 0, optional=True))
    betas: List[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = key(1e-9, Range("a positive, finite epsilon", lambda v: v > 0))
    weight_decay: float = key(0.0, Range("a non-negative, finite weight decay", lambda v: v >= 0))
    # clip the global gradient norm to this value
    grad_clip: Optional[float] = key(None, Range("a positive, finite number or null", lambda v: v > 0, optional=True))
    val_every: int = key(1000, positive(1_000_000_000))  # validate (and checkpoint) every N optimiser steps
    # also keep the weights of the last k step checkpoints, for averaging (paper: 5)
    keep_checkpoints: int = key(0, NON_NEGATIVE)
    # steps between those checkpoints (null: val_every)
    checkpoint_every: Optional[int] = key(None, Range("a positive integer, or null for val_every", lambda v: v >= 1,
                                                      optional=True))
    val_bleu: bool = True  # translation tasks: greedy-decode the validation split at each validation, log val/bleu
    log_every: int = key(50, positive(1_000_000_000))


@dataclass
class TrainerConfig:
    """Passed through to ``pytorch_lightning.Trainer`` (but ``compile``, ``attention_kernel``, ``threads`` and
    ``fuse``); anything else goes under ``extra``."""

    accelerator: str = "auto"
    devices: Any = "auto"
    strategy: str = "auto"
    precision: str = "32-true"
    accumulate_grad_batches: int = key(1, COUNT)
    limit_val_batches: Optional[float] = key(None, Range(
        "a fraction in (0, 1], a whole number of batches, or null (every batch)",
        lambda v: 0 < v <= 1 or (v > 1 and float(v).is_integer()), optional=True))
    num_sanity_val_steps: int = key(0, Range("-1 (all) or more", lambda v: v >= -1))
    deterministic: bool = False
    enable_progress_bar: bool = True
    compile: bool = False  # torch.compile the model's training forward (benchmarks/gpu.py measures what it gains)
    attention_kernel: AttentionKernel = AttentionKernel.sdpa  # sdpa | flex (ablate/train/kernels.py)
    threads: Optional[int] = None  # CPU threads (null: a sweep pool's share, else every core; ablate/train/threads.py)
    # In a sweep, this run's seed trained fused with the other seeds of its variant as one model (true; a seed array,
    # ablate/train/array.py), alone in its own process (false), or as the sweep's --fuse says (null).
    fuse: Optional[bool] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class WandbConfig:
    """Weights & Biases run settings (used when ``logger: wandb``). A sweep fills group, name and tags."""

    project: str = "ablate"
    entity: Optional[str] = None
    group: Optional[str] = None  # the sweep's name
    name: Optional[str] = None  # the run's name: the values that differ from the base
    job_type: str = "train"
    tags: List[str] = field(default_factory=list)  # a sweep's: each key the run changes, with its value (key=value)
    # A sweep run's place in its study (row, variant, seed, its level of each factor): top-level W&B config keys
    study: Dict[str, Any] = field(default_factory=dict)
    mode: WandbMode = WandbMode.auto


@dataclass
class PathsConfig:
    """Where the run's relative paths were found (:mod:`ablate.paths`), absolute, filled in by the loader and
    recorded in the run's config.yaml so that its processes and a resume from any folder find them: no part of the
    run's identity."""

    data: List[str] = field(default_factory=list)  # the folders a relative data.path is looked for in, in order
    imports: List[str] = field(default_factory=list)  # the folders of the files that name the imports


@dataclass
class RunConfig:
    """One training run: everything ``ablate train`` needs."""

    name: str = "run"
    seed: int = key(0, SEED)
    output_dir: Optional[str] = None  # default runs/<name>/<time>-<hash>
    imports: List[str] = field(default_factory=list)  # modules that register components
    paths: PathsConfig = field(default_factory=PathsConfig)  # where relative paths were found (not identity)
    logger: Logger = Logger.wandb  # every run logs to W&B; offline files when no API key is configured
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)


def run_schema() -> Any:
    """The schema of a run config: :class:`RunConfig`, plus ``<kind>`` and ``<kind>_args`` for every declared kind.

    Returns:
        A structured ``DictConfig`` (unknown keys are errors) with every default filled in.
    """
    from omegaconf import OmegaConf, open_dict

    from ablate import registry

    cfg = OmegaConf.structured(RunConfig)
    for kind in registry.kinds().values():
        section = cfg[kind.section]
        with open_dict(section):
            section[kind.field] = kind.default
            section[f"{kind.field}_args"] = {}
        OmegaConf.set_struct(section[f"{kind.field}_args"], False)  # a variant's own parameters: any names
    return cfg
