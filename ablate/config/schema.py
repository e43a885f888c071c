"""The config schema: typed dataclasses that OmegaConf validates every YAML file against.

Defaults are the paper's base model (Vaswani et al. 2017, Table 3 "base" row and
section 5). The keys that choose components (``model.positional``, ``train.schedule``,
``data.task`` ... and their ``*_args``) are not written here: each declared kind adds
its own (:func:`run_schema`), with the paper's variant as the default, so a kind
declared in user code is configured like a built-in one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional


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
    n_layers: int = 6  # N, for both stacks unless one is set below
    n_encoder_layers: Optional[int] = None
    n_decoder_layers: Optional[int] = None
    d_model: int = 512
    n_heads: int = 8  # h
    d_k: Optional[int] = None  # default d_model / h
    d_v: Optional[int] = None  # default d_model / h
    d_ff: int = 2048
    dropout: float = 0.1  # P_drop: embedding sums and every sub-layer output
    attention_dropout: float = 0.0  # on attention weights; the paper has none


@dataclass
class DataConfig:
    """Where the tokens come from. ``task`` (added by the kind) names a registered data module."""

    path: Optional[str] = None  # local folder / file, or a Hugging Face Hub dataset name
    src_lang: str = "en"
    tgt_lang: str = "de"
    vocab_size: int = 32
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    batch_size: int = 64  # sequences per batch, for tasks that batch by count
    max_tokens: int = 4096  # tokens per batch (source or target, padding included)
    length_bucket: Optional[int] = None  # static shapes: pad training batches to multiples of this (off: paper's)
    max_len: int = 256  # length filter (tokens) for training pairs; block size for LMs
    limit_train: Optional[int] = None  # use only the first N training examples
    limit_val: Optional[int] = None
    cache_dir: Optional[str] = None  # tokenizer cache; default ~/.cache/ablate
    num_workers: int = 0


@dataclass
class TrainConfig:
    """Optimisation (section 5.3, 5.4). ``schedule`` and ``schedule_args`` are added by the kind."""

    max_steps: int = 100_000
    label_smoothing: float = 0.1  # eps_ls
    lr: Optional[float] = None  # the peak lr; unset: noam's paper formula, 1e-3 for cosine and constant
    betas: List[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0
    grad_clip: Optional[float] = None  # clip the global gradient norm to this value
    val_every: int = 1000  # validate (and checkpoint) every N optimiser steps
    keep_checkpoints: int = 0  # also keep the weights of the last k step checkpoints, for averaging (paper: 5)
    checkpoint_every: Optional[int] = None  # steps between those checkpoints (None: val_every)
    val_bleu: bool = True  # translation tasks: greedy-decode the validation split at each validation, log val/bleu
    log_every: int = 50


@dataclass
class TrainerConfig:
    """Passed through to ``pytorch_lightning.Trainer`` (but ``compile``, ``attention_kernel``, ``threads`` and
    ``fuse``); anything else goes under ``extra``."""

    accelerator: str = "auto"
    devices: Any = "auto"
    strategy: str = "auto"
    precision: str = "32-true"
    accumulate_grad_batches: int = 1
    limit_val_batches: Optional[float] = None
    num_sanity_val_steps: int = 0
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
class RunConfig:
    """One training run: everything ``ablate train`` needs."""

    name: str = "run"
    seed: int = 0
    output_dir: Optional[str] = None  # default runs/<name>/<time>-<hash>
    imports: List[str] = field(default_factory=list)  # modules that register components
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
