"""Read the ``run-<id>.wandb`` files that wandb writes, for tests that check what a run really logged.

The file is a LevelDB-style log (wandb's transaction log) of ``wandb_internal_pb2.Record`` messages:
a 7-byte file header (``:W&B``, magic 0xBEE1 little-endian, version 0), then 32 KiB blocks of
chunks. A chunk is a 7-byte header (CRC-32 of type byte + data, uint32; data length, uint16;
type, uint8) and its data; a record that does not fit in a block is split into FIRST, MIDDLE...,
LAST chunks; fewer than 7 bytes left in a block are zero padding. wandb 0.31 ships no Python reader
(the old ``wandb.sdk.internal.datastore`` is gone; wandb-core writes the file).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32 * 1024
HEADER = struct.Struct("<IHB")  # crc32, length, chunk type
FILE_HEADER = struct.Struct("<4sHB")  # ident, magic, version
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path: Path) -> Iterator[pb.Record]:
    """Every record in a ``.wandb`` file, in order; checks each chunk's CRC."""
    data = Path(path).read_bytes()
    ident, magic, version = FILE_HEADER.unpack_from(data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, magic, version)
    pos, parts = FILE_HEADER.size, []
    while pos + HEADER.size <= len(data):
        if BLOCK - pos % BLOCK < HEADER.size:  # block trailer: zero padding
            pos += BLOCK - pos % BLOCK
            continue
        crc, length, kind = HEADER.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero-filled rest of a block
            pos += BLOCK - pos % BLOCK
            continue
        chunk = data[pos + HEADER.size : pos + HEADER.size + length]
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF == crc, f"bad CRC at byte {pos}"
        pos += HEADER.size + length
        if kind in (FULL, FIRST):
            parts = [chunk]
        else:
            parts.append(chunk)
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(b"".join(parts))
            yield record


def _update(target: dict[str, Any], items: Any) -> None:
    """Apply config/history/summary items; an item with a ``nested_key`` path sets a value inside a dict."""
    for item in items:
        *parents, leaf = [item.key] if item.key else list(item.nested_key)
        node = target
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = json.loads(item.value_json)


class RunLog:
    """What one ``.wandb`` file holds, decoded: the run record, config, history, summary and metric definitions."""

    def __init__(self, path: Path):
        self.records = list(read_records(path))
        runs = [r.run for r in self.records if r.WhichOneof("record_type") == "run"]
        self.run = runs[0]
        self.config: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {}
        self.metrics: dict[str, pb.MetricRecord] = {}
        for r in self.records:
            kind = r.WhichOneof("record_type")
            if kind in ("run", "config"):
                cfg = r.run.config if kind == "run" else r.config
                _update(self.config, cfg.update)
            elif kind == "history":
                self.history.append({})
                _update(self.history[-1], r.history.item)
            elif kind == "summary":
                _update(self.summary, r.summary.update)
            elif kind == "metric":
                self.metrics[r.metric.name or r.metric.glob_name] = r.metric

    def kinds(self) -> set[str]:
        return {r.WhichOneof("record_type") for r in self.records}
