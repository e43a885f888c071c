"""A shared subword vocabulary: a sentencepiece model trained once per data set and cached on disk.

Section 5.1: "Sentences were encoded using byte-pair encoding, which has a shared
source-target vocabulary". :func:`train_or_load` trains one sentencepiece model
(BPE by default) on the training sentences of both languages, with the special ids
of ``DataConfig`` (pad 0, BOS 1, EOS 2; unknown gets the smallest free id, 3).

The model is cached under ``data.cache_dir`` (default ``~/.cache/ablate``) in
``tokenizers/<model_type><vocab_size>-<hash>/``, where the hash covers the data's
identity (file paths, sizes and mtimes, or a Hub name) and every tokenizer
setting. A cache entry is written to a temporary folder and renamed into place,
so a killed run never leaves a half-written one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import sentencepiece as spm
from omegaconf import DictConfig

from ablate.errors import ConfigError

CACHE_VERSION = 1
MODEL_TYPES = ("bpe", "unigram", "char", "word")
MODEL_FILE = "spm.model"


@dataclass(frozen=True)
class TokenizerSettings:
    """Everything that changes the trained model; all of it goes into the cache key."""

    vocab_size: int
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    model_type: str = "bpe"
    character_coverage: float = 1.0
    max_sentences: int = 5_000_000  # sentencepiece samples this many sentences from larger corpora

    def __post_init__(self) -> None:
        if self.model_type not in MODEL_TYPES:
            raise ConfigError("data.task_args.model_type", self.model_type, f"one of {', '.join(MODEL_TYPES)}")
        if len({self.pad_id, self.bos_id, self.eos_id}) < 3 or min(self.pad_id, self.bos_id, self.eos_id) < 0:
            ids = (self.pad_id, self.bos_id, self.eos_id)
            raise ConfigError("data.pad_id/bos_id/eos_id", ids, "three distinct non-negative ids")
        if self.vocab_size <= max(self.pad_id, self.bos_id, self.eos_id, self.unk_id):
            raise ConfigError("data.vocab_size", self.vocab_size, "more than the largest special id")

    @classmethod
    def from_data(cls, data: DictConfig, **overrides: Any) -> TokenizerSettings:
        """The settings for ``data`` (vocab_size and special ids), plus task-specific ``overrides``."""
        return cls(vocab_size=data.vocab_size, pad_id=data.pad_id, bos_id=data.bos_id, eos_id=data.eos_id, **overrides)

    @property
    def unk_id(self) -> int:
        """The smallest id that is not pad, BOS or EOS."""
        taken = {self.pad_id, self.bos_id, self.eos_id}
        return next(i for i in range(4) if i not in taken)

    def trainer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``SentencePieceTrainer.train``."""
        return dict(
            vocab_size=self.vocab_size,
            model_type=self.model_type,
            character_coverage=self.character_coverage,
            pad_id=self.pad_id,
            bos_id=self.bos_id,
            eos_id=self.eos_id,
            unk_id=self.unk_id,
            input_sentence_size=self.max_sentences,
            shuffle_input_sentence=True,
            minloglevel=2,  # errors only: no training log on stderr
        )


class Tokenizer:
    """A trained sentencepiece model: text to ids and back.

    Args:
        model_proto: the serialized sentencepiece model.
        path: the cache folder it was loaded from or saved to, when there is one.
        from_cache: True when it was loaded rather than trained by this process.
    """

    def __init__(self, model_proto: bytes, *, path: Path | None = None, from_cache: bool = False):
        self.model_proto, self.path, self.from_cache = model_proto, path, from_cache
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle (and the datasets fingerprint) depend on the model alone, not on where it came from.
        return (Tokenizer, (self.model_proto,))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def pad_id(self) -> int:
        return self.sp.pad_id()

    @property
    def bos_id(self) -> int:
        return self.sp.bos_id()

    @property
    def eos_id(self) -> int:
        return self.sp.eos_id()

    @property
    def unk_id(self) -> int:
        return self.sp.unk_id()

    def encode(self, text: str) -> list[int]:
        """Subword ids of ``text``, without BOS or EOS."""
        return self.sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Subword ids of each text (sentencepiece encodes the list in parallel)."""
        return self.sp.encode(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; pad, BOS and EOS decode to nothing (truncating at EOS is the caller's job)."""
        return self.sp.decode([int(i) for i in ids])

    def piece(self, i: int) -> str:
        """One id's subword as sentencepiece writes it (``▁the``), for labels."""
        return self.sp.id_to_piece(int(i))


def cache_root(cache_dir: str | None) -> Path:
    """The cache folder: ``data.cache_dir``, or ``~/.cache/ablate`` when unset."""
    return Path(cache_dir or "~/.cache/ablate").expanduser()


def is_local_path(path: str) -> bool:
    """Whether ``data.path`` is a local file or folder (it exists or looks like a path), not a Hub name."""
    return Path(path).expanduser().exists() or Path(path).is_absolute() or path.startswith((".", "~"))


def file_identity(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """What identifies local data files for the cache: resolved path, size and mtime of each."""
    out = []
    for path in paths:
        p = Path(path).expanduser().resolve()
        st = p.stat()
        out.append({"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


def cache_key(identity: Mapping[str, Any], settings: TokenizerSettings) -> str:
    """The cache folder name for a model trained with ``settings`` on the data named by ``identity``."""
    blob = {"version": CACHE_VERSION, "sentencepiece": spm.__version__, "data": identity, "tokenizer": asdict(settings)}
    digest = hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{settings.model_type}{settings.vocab_size}-{digest}"


def train(sentences: Iterable[str], settings: TokenizerSettings) -> bytes:
    """Train a sentencepiece model on ``sentences``; returns the serialized model.

    Raises:
        ConfigError: sentencepiece cannot reach ``vocab_size`` on this data (too large or too small).
    """
    buffer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=buffer, **settings.trainer_kwargs()
        )
    except RuntimeError as exc:
        raise ConfigError("data.vocab_size", settings.vocab_size, f"a size sentencepiece can train ({exc})") from exc
    return buffer.getvalue()


def train_or_load(
    sentences: Iterable[str], *, settings: TokenizerSettings, identity: Mapping[str, Any], cache_dir: str | None
) -> Tokenizer:
    """Load the cached model for (``identity``, ``settings``), or train it on ``sentences`` and cache it.

    Args:
        sentences: the training sentences; consumed only when there is no cache entry.
        settings: the tokenizer settings.
        identity: what identifies the data (JSON-serialisable), e.g. :func:`file_identity` of the files.
        cache_dir: ``data.cache_dir``; ``None`` means ``~/.cache/ablate``.

    Returns:
        The tokenizer; ``from_cache`` says whether it was loaded.
    """
    folder = cache_root(cache_dir) / "tokenizers" / cache_key(identity, settings)
    if (folder / MODEL_FILE).is_file():
        return Tokenizer((folder / MODEL_FILE).read_bytes(), path=folder, from_cache=True)
    proto = train(sentences, settings)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        (tmp / MODEL_FILE).write_bytes(proto)
        meta = {"data": identity, "tokenizer": asdict(settings), "sentencepiece": spm.__version__}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
        os.rename(tmp, folder)  # atomic; fails if another process got there first
    except OSError:
        if not (folder / MODEL_FILE).is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Tokenizer(proto, path=folder, from_cache=False)
