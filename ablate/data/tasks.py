"""The built-in tasks, registered without importing their modules (Lightning, datasets), which load when built.

Each declares the ``data.*`` keys it reads beyond those every model reads (``vocab_size`` and the
special ids): a sweep that sets one its task does not read is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from ablate.data.task import Task
from ablate.registry import register

if TYPE_CHECKING:
    from ablate.data.synthetic import SyntheticSeq2Seq

SYNTHETIC = ("data.max_len", "data.batch_size")
PARALLEL_TEXT = ("data.path", "data.src_lang", "data.tgt_lang", "data.max_tokens", "data.length_bucket", "data.max_len",
                 "data.limit_train", "data.limit_val", "data.cache_dir", "data.num_workers", "train.val_bleu")
TEXT_LM = ("data.path", "data.max_len", "data.batch_size", "data.limit_train", "data.limit_val", "data.cache_dir",
           "data.num_workers")


def _seq2seq(name: str, data: DictConfig, seed: int, min_len: int, n_train: int, n_val: int) -> SyntheticSeq2Seq:
    from ablate.data.synthetic import TRANSFORMS, SyntheticSeq2Seq

    return SyntheticSeq2Seq(data, seed, TRANSFORMS[name], min_len=min_len, n_train=n_train, n_val=n_val)


@register("task", "reverse", reads=SYNTHETIC)
def reverse(*, data: DictConfig, seed: int, min_len: int = 1, n_train: int = 20000, n_val: int = 1000) -> Task:
    """Reverse a random string: impossible without position information (the embedded default)."""
    return _seq2seq("reverse", data, seed, min_len, n_train, n_val)


@register("task", "copy", reads=SYNTHETIC)
def copy(*, data: DictConfig, seed: int, min_len: int = 1, n_train: int = 20000, n_val: int = 1000) -> Task:
    """Copy a random string."""
    return _seq2seq("copy", data, seed, min_len, n_train, n_val)


@register("task", "sort", reads=SYNTHETIC)
def sort(*, data: DictConfig, seed: int, min_len: int = 1, n_train: int = 20000, n_val: int = 1000) -> Task:
    """Sort a random string: a set function, needs no positions (control)."""
    return _seq2seq("sort", data, seed, min_len, n_train, n_val)


@register("task", "random_lm", reads=SYNTHETIC)
def random_lm(*, data: DictConfig, seed: int, n_train: int = 2000, n_val: int = 200) -> Task:
    """I.i.d. uniform tokens for a decoder-only model: no val loss below log(K) unless labels leak (control)."""
    from ablate.data.synthetic import RandomTokensLM

    return RandomTokensLM(data, seed, n_train=n_train, n_val=n_val)


@register("task", "parallel_text", reads=PARALLEL_TEXT)
def parallel_text(*, data: DictConfig, seed: int, train_split: str = "train", val_split: str = "val",
                  test_split: str | None = "test_2016_flickr", hub_config: str | None = None,
                  model_type: str = "bpe") -> Task:
    """Translation pairs from aligned {split}.{lang} files or a Hub dataset, batched by token count."""
    from ablate.data.translation import ParallelText

    splits = {"train": train_split, "val": val_split, "test": test_split}
    return ParallelText(data, seed, splits=splits, hub_config=hub_config, model_type=model_type)


@register("task", "text_lm", reads=TEXT_LM)
def text_lm(*, data: DictConfig, seed: int, train_fraction: float = 0.9, hub_split: str = "train",
            model_type: str = "bpe") -> Task:
    """Language modelling on a plain-text file or Hub dataset: blocks of data.max_len subword tokens."""
    from ablate.data.lm import TextLM

    return TextLM(data, seed, train_fraction=train_fraction, hub_split=hub_split, model_type=model_type)
