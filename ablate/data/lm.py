"""Decoder-only language modelling on plain text: a sentencepiece vocabulary and blocks of ``data.max_len`` tokens.

``data.path`` is a text file (e.g. tinyshakespeare ``input.txt``) or a Hub dataset with a ``text``
column, read with ``datasets`` one row per line (or per Hub row). The split is deterministic: the
first ``train_fraction`` of the rows train, the rest validate. The tokenizer is trained on the
training rows. Each row is encoded and followed by EOS, which stands for the line break, and the
rows are concatenated into one token stream per split.

Training uses the stream's non-overlapping chunks of ``T + 1`` tokens, shuffled each epoch by
(seed, epoch); validation uses the same chunks in order. A batch is ``{"ids": (B, T), "labels": (B, T)}``
with ``labels`` the ids shifted left by one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow.compute as pc
import pytorch_lightning as pl
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader, Dataset

from ablate.data.collate import stack_lm
from ablate.data.sampler import ShuffledBatches
from ablate.data.task import Task
from ablate.data.tokenizer import Tokenizer, TokenizerSettings, cache_root, file_identity, is_local_path, train_or_load
from ablate.errors import ConfigError

if TYPE_CHECKING:
    import datasets


class Blocks(Dataset):
    """Non-overlapping chunks of a token stream: item i is ``stream[i*T : i*T + T + 1]`` split into ids and labels.

    Args:
        stream: the token ids, (N,).
        block_size: T.
        limit: at most this many blocks.
    """

    def __init__(self, stream: torch.Tensor, block_size: int, limit: int | None = None):
        self.stream, self.block_size = stream, block_size
        n = max((len(stream) - 1) // block_size, 0)
        self.n_blocks = n if limit is None else min(n, limit)

    def __len__(self) -> int:
        return self.n_blocks

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        chunk = self.stream[i * self.block_size : (i + 1) * self.block_size + 1]  # (T + 1,)
        return {"ids": chunk[:-1], "labels": chunk[1:]}  # (T,), (T,)


def load_rows(path: str, cache_dir: Path, hub_split: str) -> datasets.Dataset:
    """The text of a local file (one row per line) or a Hub dataset split, as a dataset with a ``text`` column.

    Raises:
        ConfigError: the file is missing, the Hub dataset cannot be loaded, or it has no ``text`` column.
    """
    from datasets import load_dataset

    if is_local_path(path):
        if not Path(path).expanduser().is_file():
            raise ConfigError("data.path", path, "an existing text file, or a Hub dataset name with a 'text' column")
        return load_dataset("text", data_files=str(Path(path).expanduser()), cache_dir=str(cache_dir), split="train")
    try:
        ds = load_dataset(path, split=hub_split)
    except (OSError, ValueError) as exc:  # offline, unknown name or split
        raise ConfigError("data.path", path, f"an existing text file or a loadable Hub dataset ({exc})") from exc
    if "text" not in ds.column_names:
        raise ConfigError("data.path", path, f"a dataset with a 'text' column (columns: {ds.column_names})")
    return ds.select_columns(["text"])


def _encode(batch: dict[str, list[str]], tokenizer: Tokenizer) -> dict[str, list[list[int]]]:
    return {"ids": [ids + [tokenizer.eos_id] for ids in tokenizer.encode_batch(batch["text"])]}


class TextLM(Task, pl.LightningDataModule):
    """Blocks of ``data.max_len`` subword tokens from one text, split by rows into train and validation."""

    def __init__(self, data: DictConfig, seed: int, *, train_fraction: float, hub_split: str, model_type: str):
        super().__init__()
        if not data.path:
            raise ConfigError("data.path", data.path, "a text file or a Hub dataset name with a 'text' column")
        if not 0.0 < train_fraction < 1.0:
            raise ConfigError("data.task_args.train_fraction", train_fraction, "a number in (0, 1)")
        if is_local_path(str(data.path)) and not Path(str(data.path)).expanduser().is_file():
            raise ConfigError(
                "data.path", data.path, "an existing text file, or a Hub dataset name with a 'text' column"
            )
        self.cfg, self.seed, self.train_fraction, self.hub_split = data, seed, train_fraction, hub_split
        self.settings = TokenizerSettings.from_data(data, model_type=model_type)
        self._rows: dict[str, datasets.Dataset] = {}
        self._streams: dict[str, torch.Tensor] = {}
        self._tokenizer: Tokenizer | None = None

    def _load(self) -> None:
        """Read the rows and split them: the first ``train_fraction`` train, the rest validate."""
        if self._rows:
            return
        rows = load_rows(str(self.cfg.path), cache_root(self.cfg.cache_dir) / "datasets", self.hub_split)
        n_train = int(len(rows) * self.train_fraction)
        if not 0 < n_train < len(rows):
            raise ConfigError("data.path", self.cfg.path, f"a text of more rows ({len(rows)} cannot be split)")
        self._rows = {"train": rows.select(range(n_train)), "val": rows.select(range(n_train, len(rows)))}

    def _identity(self) -> dict[str, Any]:
        """What identifies the tokenizer's training data, for its cache key."""
        path = str(self.cfg.path)
        file = Path(path).expanduser()
        data: Any = file_identity([file]) if file.is_file() else {"hub": path, "split": self.hub_split}
        return {"task": "text_lm", "data": data, "train_fraction": self.train_fraction}

    def _lines(self) -> Iterator[str]:
        for row in self._rows["train"]["text"]:
            yield from (line for line in row.splitlines() if line.strip())

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer, trained on the training rows' lines (or loaded from the cache)."""
        if self._tokenizer is None:
            self._load()
            self._tokenizer = train_or_load(
                self._lines(), settings=self.settings, identity=self._identity(), cache_dir=self.cfg.cache_dir
            )
        return self._tokenizer

    def prepare_data(self) -> None:
        self.tokenizer  # noqa: B018  (rank 0 trains and caches it; the other ranks load it in setup)

    def stream(self, split: str) -> torch.Tensor:
        """The token stream of ``split`` (``train`` or ``val``): every row's ids then EOS, (N,)."""
        if split not in self._streams:
            self._load()
            encoded = self._rows[split].map(_encode, batched=True, fn_kwargs={"tokenizer": self.tokenizer})
            flat = pc.list_flatten(encoded.with_format("arrow")["ids"]).to_numpy()  # (N,)
            self._streams[split] = torch.from_numpy(flat).long()
        return self._streams[split]

    def blocks(self, split: str) -> Blocks:
        """The ``split`` stream cut into blocks of T = ``data.max_len``, capped by ``limit_train``/``limit_val``.

        Raises:
            ConfigError: the split is shorter than one block.
        """
        limit = self.cfg.limit_train if split == "train" else self.cfg.limit_val
        out = Blocks(self.stream(split), self.cfg.max_len, limit)
        if len(out) == 0:
            raise ConfigError(
                "data.max_len", self.cfg.max_len, f"fewer tokens than the {split} split's {len(self.stream(split))}"
            )
        return out

    def setup(self, stage: str | None = None) -> None:
        for split in ("train", "val") if stage in (None, "fit") else ("val",):
            self.blocks(split)

    def decode_text(self, ids: list[int] | torch.Tensor) -> str:
        """Text of a stretch of the stream: EOS becomes a line break."""
        lines: list[list[int]] = [[]]
        for i in (int(i) for i in ids):
            if i == self.tokenizer.eos_id:
                lines.append([])
            else:
                lines[-1].append(i)
        return "\n".join(self.tokenizer.decode(line) for line in lines)

    def _loader(self, split: str, train: bool) -> DataLoader:
        blocks = self.blocks(split)
        rank, world = self.rank()
        sampler = ShuffledBatches(len(blocks), self.cfg.batch_size, shuffle=train, seed=self.seed, rank=rank,
                                  world_size=world, drop_last=train)
        return self.batch_loader(blocks, sampler, stack_lm, train=train, num_workers=self.cfg.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", train=False)

    test_dataloader = val_dataloader
