"""Checkpoint averaging: the mean of the weights, tied weights kept tied, the step checkpoints found in order."""

from __future__ import annotations

import pytest
import torch

from ablate.errors import ConfigError
from ablate.evaluate.average import (
    average_checkpoints,
    average_state_dicts,
    last_checkpoints,
    step_checkpoints,
)


def _state(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    embedding = torch.randn(6, 4, generator=g)
    return {
        "model.src_input.embedding.weight": embedding,  # three-way tying: one tensor under three names
        "model.tgt_input.embedding.weight": embedding,
        "model.generator.embedding.weight": embedding,
        "model.w.bias": torch.randn(4, generator=g),
        "model.half": torch.randn(3, generator=g).to(torch.bfloat16),
        "model.steps": torch.tensor(seed * 10),  # a non-float buffer: taken from the last checkpoint
    }


def test_two_checkpoints_average_to_the_mean_of_their_tensors(tmp_path):
    a, b = _state(1), _state(2)
    paths = [tmp_path / "step-10.ckpt", tmp_path / "step-20.ckpt"]
    for state, path in zip((a, b), paths):
        torch.save({"state_dict": state, "global_step": 0}, path)
    avg = average_checkpoints(paths)
    assert avg.keys() == a.keys()
    for key in ("model.src_input.embedding.weight", "model.w.bias"):
        torch.testing.assert_close(avg[key], (a[key] + b[key]) / 2, atol=0, rtol=0)
    assert avg["model.half"].dtype == torch.bfloat16
    torch.testing.assert_close(avg["model.half"],
                               ((a["model.half"].double() + b["model.half"].double()) / 2).bfloat16())
    assert avg["model.steps"] == 20
    assert avg["model.tgt_input.embedding.weight"] is avg["model.src_input.embedding.weight"]  # still tied
    assert avg["model.generator.embedding.weight"] is avg["model.src_input.embedding.weight"]


def test_averaging_one_state_gives_it_back_and_mismatches_are_refused():
    a = _state(3)
    assert all(torch.equal(v, a[k]) for k, v in average_state_dicts([a]).items())
    with pytest.raises(ValueError, match="other keys"):
        average_state_dicts([a, {k: v for k, v in _state(4).items() if k != "model.w.bias"}])
    untied = {**_state(4), "model.generator.embedding.weight": torch.zeros(6, 4)}
    with pytest.raises(ValueError, match="tied"):
        average_state_dicts([a, untied])
    with pytest.raises(ValueError, match="no state dicts"):
        average_state_dicts([])


def test_step_checkpoints_are_sorted_by_step(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in ("step-100.ckpt", "step-9.ckpt", "step-step=20.ckpt", "best.ckpt", "last.ckpt", "step-x.ckpt"):
        (folder / name).touch()
    assert [p.name for p in step_checkpoints(tmp_path)] == ["step-9.ckpt", "step-step=20.ckpt", "step-100.ckpt"]
    assert [p.name for p in last_checkpoints(tmp_path, 2)] == ["step-step=20.ckpt", "step-100.ckpt"]
    with pytest.raises(ConfigError, match="--average-last=4"):
        last_checkpoints(tmp_path, 4)
