"""Parallel text for translation (sections 5.1 and 6.1): sentence pairs, a shared subword vocabulary,
a length filter and batches of about ``data.max_tokens`` tokens.

``data.path`` is either a local folder of aligned ``{split}.{lang}`` files, one sentence per line
(Multi30k: ``train.en``/``train.de``, ``val.*``, ``test_2016_flickr.*``), or a Hugging Face Hub
dataset with a ``translation: {en: ..., de: ...}`` column or flat ``en``/``de`` columns. Both are
read with ``datasets``; lines are stripped and runs of whitespace (U+00A0, tabs) become one space.

The tokenizer is trained on the (``limit_train``-limited) training split, both languages. Training
pairs with an empty side, a source longer than ``data.max_len`` or a decoder input
(``[BOS] + y``) longer than ``data.max_len`` are dropped; validation and test pairs are all kept.
Validation and test batches come in ascending length order: :meth:`ParallelText.example_order`
maps them back to :meth:`ParallelText.sources` / :meth:`ParallelText.references`.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
import pytorch_lightning as pl
from omegaconf import DictConfig
from torch.utils.data import DataLoader, Dataset

from ablate.data.batching import TokenBatchSampler
from ablate.data.collate import Seq2SeqCollator
from ablate.data.task import Task
from ablate.data.tokenizer import Tokenizer, TokenizerSettings, cache_root, file_identity, is_local_path, train_or_load
from ablate.errors import ConfigError

if TYPE_CHECKING:
    import datasets

STAGE_SPLITS = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("test",)}


def _clean(batch: dict[str, list[str]]) -> dict[str, list[str]]:
    """Strip, and make every run of whitespace (U+00A0, tabs, double spaces) one plain space."""
    return {side: [" ".join(s.split()) for s in batch[side]] for side in ("src", "tgt")}


def _unnest(batch: dict[str, list[dict[str, str]]], src: str, tgt: str) -> dict[str, list[str]]:
    return {"src": [t[src] for t in batch["translation"]], "tgt": [t[tgt] for t in batch["translation"]]}


def _encode(batch: dict[str, list[str]], tokenizer: Tokenizer) -> dict[str, list[Any]]:
    src, tgt = tokenizer.encode_batch(batch["src"]), tokenizer.encode_batch(batch["tgt"])
    return {"src_ids": src, "tgt_ids": tgt, "src_len": [len(s) for s in src], "tgt_len": [len(t) for t in tgt]}


def _fits(src_len: list[int], tgt_len: list[int], max_len: int) -> list[bool]:
    return [0 < s <= max_len and 0 < t and t + 1 <= max_len for s, t in zip(src_len, tgt_len)]


def load_local(path: str, files: dict[str, str], src: str, tgt: str, cache_dir: Path) -> dict[str, datasets.Dataset]:
    """Load aligned ``{name}.{lang}`` files from folder ``path`` as datasets with ``src``/``tgt`` columns.

    Args:
        files: split key (``train``, ``val``, ``test``) to file stem, e.g. ``{"test": "test_2016_flickr"}``.

    Raises:
        ConfigError: the folder or a file is missing, or a pair of files is not aligned.
    """
    from datasets import concatenate_datasets, load_dataset

    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError("data.path", path, "an existing folder of {split}.{lang} files, or a Hub dataset name")
    for key, name in files.items():
        if not all((folder / f"{name}.{lang}").is_file() for lang in (src, tgt)):
            found = ", ".join(sorted(p.name for p in folder.iterdir() if p.is_file())) or "nothing"
            raise ConfigError(
                f"data.task_args.{key}_split",
                name,
                f"files {name}.{src} and {name}.{tgt} in data.path={path} (found: {found})",
            )
    sides = {
        lang: load_dataset(
            "text", data_files={k: str(folder / f"{n}.{lang}") for k, n in files.items()}, cache_dir=str(cache_dir)
        )
        for lang in (src, tgt)
    }
    out = {}
    for key, name in files.items():
        a, b = sides[src][key], sides[tgt][key]
        if len(a) != len(b):
            raise ConfigError(
                "data.path", path, f"aligned files: {name}.{src} has {len(a)} lines, {name}.{tgt} has {len(b)}"
            )
        out[key] = concatenate_datasets([a.rename_column("text", "src"), b.rename_column("text", "tgt")], axis=1)
    return out


def load_hub(name: str, config: str | None, files: dict[str, str], src: str, tgt: str) -> dict[str, datasets.Dataset]:
    """Load splits of Hub dataset ``name`` as datasets with ``src``/``tgt`` columns.

    Raises:
        ConfigError: the dataset cannot be loaded, lacks a split, or has neither column layout.
    """
    from datasets import load_dataset

    try:
        splits = load_dataset(name, config)
    except (OSError, ValueError) as exc:  # offline, unknown name, unknown config
        raise ConfigError("data.path", name, f"an existing local folder or a loadable Hub dataset ({exc})") from exc
    out = {}
    for key, split in files.items():
        if split not in splits:
            raise ConfigError(f"data.task_args.{key}_split", split, f"a split of {name} ({', '.join(splits)})")
        ds, cols = splits[split], splits[split].column_names
        if "translation" in cols and len(ds) and {src, tgt} <= set(ds[0]["translation"]):
            out[key] = ds.map(_unnest, batched=True, remove_columns=cols, fn_kwargs={"src": src, "tgt": tgt})
        elif {src, tgt} <= set(cols):
            out[key] = ds.select_columns([src, tgt]).rename_columns({src: "src", tgt: "tgt"})
        else:
            layouts = f"a 'translation' column with {src!r}/{tgt!r} keys, or columns {src!r} and {tgt!r}"
            raise ConfigError("data.src_lang/tgt_lang", f"{src}/{tgt}", f"{layouts} in {name} (columns: {cols})")
    return out


class _Pairs(Dataset):
    """(source ids, target ids) pairs of an encoded split, fetched a list of indices at a time."""

    def __init__(self, ds: datasets.Dataset):
        self.ds = ds.select_columns(["src_ids", "tgt_ids"])

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, indices: list[int]) -> list[tuple[list[int], list[int]]]:
        rows = self.ds[list(indices)]
        return list(zip(rows["src_ids"], rows["tgt_ids"]))

    __getitems__ = __getitem__


class ParallelText(Task, pl.LightningDataModule):
    """Sentence pairs ``src_lang -> tgt_lang`` with a shared sentencepiece vocabulary, batched by tokens.

    Batches are :class:`~ablate.data.collate.Seq2SeqCollator` dicts: ``src_ids`` (B, S),
    ``tgt_ids`` (B, T) = [BOS] + y, ``labels`` (B, T) = y + [EOS], padded with ``data.pad_id``.
    """

    def __init__(
        self, data: DictConfig, seed: int, *, splits: dict[str, str | None], hub_config: str | None, model_type: str
    ):
        super().__init__()
        if not data.path:
            raise ConfigError("data.path", data.path, "a folder of {split}.{lang} files or a Hub dataset name")
        self.cfg, self.seed, self.hub_config = data, seed, hub_config
        self.splits = {k: v for k, v in splits.items() if v is not None}
        self.settings = TokenizerSettings.from_data(data, model_type=model_type)
        self.collate = Seq2SeqCollator(data.pad_id, data.bos_id, data.eos_id)
        self.bucket = data.length_bucket  # static training shapes (ablate.data.batching), None: off
        if self.bucket is not None and not (isinstance(self.bucket, int) and self.bucket >= 1):
            raise ConfigError("data.length_bucket", self.bucket, "a positive whole number of tokens, or null (off)")
        self.train_collate = Seq2SeqCollator(data.pad_id, data.bos_id, data.eos_id, self.bucket, data.max_tokens)
        self.local = is_local_path(str(data.path))
        if self.local and not Path(str(data.path)).expanduser().is_dir():
            raise ConfigError(
                "data.path", data.path, "an existing folder of {split}.{lang} files, or a Hub dataset name"
            )
        self._raw: dict[str, datasets.Dataset] = {}
        self._encoded: dict[str, datasets.Dataset] = {}
        self._tokenizer: Tokenizer | None = None

    def _load(self, keys: Iterable[str]) -> None:
        """Load, clean and limit the raw text of the splits ``keys`` that are not loaded yet."""
        missing = {}
        for key in keys:
            if key not in self.splits:
                raise ConfigError(f"data.task_args.{key}_split", None, f"a split name: the {key} split is needed")
            if key not in self._raw:
                missing[key] = self.splits[key]
        if not missing:
            return
        src, tgt, path = self.cfg.src_lang, self.cfg.tgt_lang, str(self.cfg.path)
        if self.local:
            loaded = load_local(path, missing, src, tgt, cache_root(self.cfg.cache_dir) / "datasets")
        else:
            loaded = load_hub(path, self.hub_config, missing, src, tgt)
        limits = {"train": self.cfg.limit_train, "val": self.cfg.limit_val}
        for key, ds in loaded.items():
            if limits.get(key) is not None:
                ds = ds.select(range(min(limits[key], len(ds))))
            self._raw[key] = ds.map(_clean, batched=True)

    def _identity(self) -> dict[str, Any]:
        """What identifies the tokenizer's training data, for its cache key."""
        langs, name = (self.cfg.src_lang, self.cfg.tgt_lang), self.splits["train"]
        if self.local:
            data: Any = file_identity(Path(str(self.cfg.path)).expanduser() / f"{name}.{lang}" for lang in langs)
        else:
            data = {"hub": self.cfg.path, "config": self.hub_config, "split": name}
        return {"task": "parallel_text", "data": data, "langs": langs, "limit_train": self.cfg.limit_train}

    @property
    def tokenizer(self) -> Tokenizer:
        """The shared tokenizer, trained on the training split (or loaded from the cache)."""
        if self._tokenizer is None:
            self._load(["train"])
            train = self._raw["train"]
            sentences = itertools.chain(iter(train["src"]), iter(train["tgt"]))
            self._tokenizer = train_or_load(
                sentences, settings=self.settings, identity=self._identity(), cache_dir=self.cfg.cache_dir
            )
        return self._tokenizer

    def prepare_data(self) -> None:
        self.tokenizer  # noqa: B018  (rank 0 trains and caches it; the other ranks load it in setup)

    def setup(self, stage: str | None = None) -> None:
        self._prepare(STAGE_SPLITS.get(stage, tuple(self.splits)))

    def _prepare(self, keys: Iterable[str]) -> None:
        """Load and tokenize the splits ``keys``; drop over-long training pairs."""
        keys = list(keys)
        self._load(keys)
        for key in keys:
            if key not in self._encoded:
                ds = self._raw[key].map(_encode, batched=True, fn_kwargs={"tokenizer": self.tokenizer})
                if key == "train":
                    ds = ds.filter(
                        _fits,
                        input_columns=["src_len", "tgt_len"],
                        batched=True,
                        fn_kwargs={"max_len": self.cfg.max_len},
                    )
                self._encoded[key] = ds

    def encoded(self, split: str) -> datasets.Dataset:
        """The tokenized split: columns ``src``, ``tgt``, ``src_ids``, ``tgt_ids``, ``src_len``, ``tgt_len``."""
        self._prepare([split])
        return self._encoded[split]

    def sources(self, split: str) -> list[str]:
        """The cleaned source sentences of ``split``, in file order (after ``limit_*``)."""
        self._load([split])
        return list(self._raw[split]["src"])

    def references(self, split: str) -> list[str]:
        """The cleaned target sentences of ``split``, in file order: the BLEU references."""
        self._load([split])
        return list(self._raw[split]["tgt"])

    def sampler(self, split: str) -> TokenBatchSampler:
        """The batch sampler of ``split``: shuffled for ``train``, length-ordered otherwise."""
        cols = self.encoded(split).select_columns(["src_len", "tgt_len"]).with_format("numpy")[:]
        src, tgt = cols["src_len"], cols["tgt_len"] + 1  # (N,) each: S and T = |y| + 1
        rank, world_size = self.rank()
        train = split == "train"  # shuffled, and disjoint across ranks; evaluation keeps every example
        return TokenBatchSampler(np.maximum(src, tgt), then_by=(src, tgt), max_tokens=self.cfg.max_tokens,
                                 shuffle=train, seed=self.seed, rank=rank, world_size=world_size, drop_last=train,
                                 bucket=self.bucket if train else None)

    def example_order(self, split: str) -> list[int]:
        """Indices into ``sources(split)``/``references(split)`` in the order this rank's batches hold them."""
        return [i for batch in self.sampler(split) for i in batch]

    def _loader(self, split: str) -> DataLoader:
        collate = self.train_collate if split == "train" else self.collate
        return self.batch_loader(_Pairs(self.encoded(split)), self.sampler(split), collate, train=split == "train",
                                 num_workers=self.cfg.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train")

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")
