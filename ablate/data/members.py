"""The data of a seed array: each member's own task (its own seed: its own data order, its own held-out set), their
batches stacked on a leading member axis, one step at a time.

Member k's batches come in the order its solo run would get them: its task's training loader, epoch after epoch
(the order of epoch e is a function of (seed, e): :mod:`ablate.data.sampler`), each member counting its own epochs.
A step stacks one batch of each member, padded to a common shape: columns with ``pad_id`` (keys that are padding,
labels that are ignored), and, when a member's batch has fewer rows, rows that repeat its first row's inputs with
every label ignored, so that every row attends to something and nothing new is scored.

Each batch carries ``position``: per member, (epoch, batches of that epoch done once this batch is trained), what the
array's checkpoint records so that a resumed array starts each member where it stopped (:meth:`resume_from`).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

Batch = dict[str, torch.Tensor]


def stack_batches(batches: list[Batch], pad_id: int) -> Batch:
    """K member batches of (B_k, T_k) tensors -> one batch of (K, B, T) tensors, B and T the largest."""
    rows = max(b["labels"].size(0) for b in batches)
    cols = {key: max(b[key].size(-1) for b in batches) for key in batches[0]}
    out = {}
    for key in batches[0]:
        padded = []
        for b in batches:
            t = F.pad(b[key], (0, cols[key] - b[key].size(-1)), value=pad_id)  # (B_k, T)
            if t.size(0) < rows:
                filler = torch.full_like(t[:1], pad_id) if key == "labels" else t[:1]
                t = torch.cat([t, filler.expand(rows - t.size(0), -1)])  # (B, T)
            padded.append(t)
        out[key] = torch.stack(padded)  # (K, B, T)
    return out


class _Training:
    """The training stream of every member: an endless iterable of stacked batches."""

    def __init__(self, tasks: list[Any], pad_id: int):
        self.tasks, self.pad_id = tasks, pad_id

    def __iter__(self) -> Iterator[Batch]:
        streams = [_epochs(task) for task in self.tasks]
        while True:
            positions, batches = zip(*(next(s) for s in streams))
            yield {**stack_batches(list(batches), self.pad_id), "position": [list(p) for p in positions]}


def _epochs(task: Any) -> Iterator[tuple[tuple[int, int], Batch]]:
    """One member's training batches, epoch after epoch, each with (epoch, batches done in it once trained)."""
    loader = task.train_dataloader()  # starts where the task was told to (Task.resume_from)
    sampler = loader.sampler
    epoch, done = sampler.epoch, sampler._skip
    while True:
        for batch in loader:
            done += 1
            yield (epoch, done), batch
        epoch, done = epoch + 1, 0
        sampler.set_epoch(epoch)


class _Validation:
    """Every member's held-out batches, stacked; a member with fewer batches is padded with ignored labels."""

    def __init__(self, tasks: list[Any], pad_id: int):
        self.tasks, self.pad_id = tasks, pad_id

    def __iter__(self) -> Iterator[Batch]:
        loaders = [list(task.val_dataloader()) for task in self.tasks]
        for i in range(max(len(batches) for batches in loaders)):
            step = []
            for batches in loaders:
                if i < len(batches):
                    step.append(batches[i])
                else:  # nothing left of this member's set: its last batch, scoring nothing
                    step.append({**batches[-1], "labels": torch.full_like(batches[-1]["labels"], self.pad_id)})
            yield stack_batches(step, self.pad_id)

    def __len__(self) -> int:
        return max(len(task.val_dataloader()) for task in self.tasks)


class MemberData(pl.LightningDataModule):
    """The members' tasks as one data module; ``tasks[k]`` is member k's (built from its config)."""

    shards_itself = True  # no DistributedSampler: arrays train on one device

    def __init__(self, tasks: list[Any], pad_id: int):
        super().__init__()
        self.tasks, self.pad_id = tasks, pad_id

    def setup(self, stage: str | None = None) -> None:
        for task in self.tasks:
            task.setup(stage)

    def resume_from(self, positions: list[list[int]]) -> None:
        """Start member k's next training batch at ``positions[k]`` = (epoch, batches done in it)."""
        for task, (epoch, done) in zip(self.tasks, positions):
            task.resume_from(epoch, done)

    def train_dataloader(self) -> _Training:
        return _Training(self.tasks, self.pad_id)

    def val_dataloader(self) -> _Validation:
        return _Validation(self.tasks, self.pad_id)
