"""Length extrapolation of a language-model run: val loss at 1x, 2x, 4x the training length, computed again
here block by block; a positional component that cannot encode a length says so."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

import ablate
from ablate.errors import ConfigError
from ablate.evaluate.lengths import evaluate_lengths
from ablate.evaluate.load import load_run_model, run_task
from ablate.train.run import train
from tests.conftest import LM, REPO, ablate_here


def _brute_force(run_dir, factor: int) -> float:
    """Mean NLL over the same tokens, one block at a time, the loss written out as -log softmax."""
    cfg, model, _ = load_run_model(run_dir, device="cpu")
    stream = run_task(cfg).stream("val")
    T, longest = factor * cfg.data.max_len, 4 * cfg.data.max_len
    stream = stream[: (len(stream) - 1) // longest * longest + 1]
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(stream) - 1, T):
            ids, labels = stream[start : start + T], stream[start + 1 : start + T + 1]
            logp = F.log_softmax(model(ids[None])[0].double(), dim=-1)  # (T, V)
            total -= float(logp[torch.arange(T), labels].sum())
            count += T
    return total / count


def test_val_loss_at_each_length_is_the_mean_nll_of_the_same_tokens(lm_run_dir):
    out = evaluate_lengths(lm_run_dir, factors=(1, 2, 4), device="cpu")
    for f in (1, 2, 4):
        assert out[f"val/loss@{f}x"] == pytest.approx(_brute_force(lm_run_dir, f), rel=1e-5)
        assert out[f"val/ppl@{f}x"] == pytest.approx(math.exp(out[f"val/loss@{f}x"]))
    result = json.loads((lm_run_dir / "result.json").read_text())
    assert result["status"] == "finished" and result["val/loss@2x"] == out["val/loss@2x"]  # merged in
    lengths = result["lengths"]
    assert lengths["block"] == 32 and lengths["tokens"] % (4 * 32) == 0 and lengths["unsupported"] == {}


def test_learned_positions_cannot_be_scored_beyond_their_table(shared_data, tmp_path):
    cfg = ablate.load_config(REPO / "configs/tinyshakespeare.yaml", LM + [
        "model.positional=learned", "model.positional_args.max_len=64",
        f"data.path={shared_data / 'tinyshakespeare' / 'input.txt'}", f"data.cache_dir={tmp_path / 'cache'}",
        f"output_dir={tmp_path / 'run'}"])
    run_dir = train(cfg)
    out = ablate_here("evaluate", str(run_dir), "--lengths", "1,2,4", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("1x (32 tokens): val/loss ") and lines[1].startswith("2x (64 tokens): val/loss ")
    assert lines[2] == "4x (128 tokens): cannot: LearnedPositional encodes at most 64 positions"
    result = json.loads((run_dir / "result.json").read_text())
    assert "val/loss@4x" not in result and "4x" in result["lengths"]["unsupported"]


def test_bad_lengths_and_translation_runs_are_refused(lm_run_dir, run_dir):
    with pytest.raises(ConfigError, match=r"--lengths=100000 .*fits in the validation split"):
        evaluate_lengths(lm_run_dir, factors=(100000,), device="cpu")
    with pytest.raises(ConfigError, match="decoder_only"):
        evaluate_lengths(run_dir, device="cpu")
    out = ablate_here("evaluate", str(lm_run_dir), "--lengths", "1,x", cwd=REPO)
    assert out.returncode == 2 and "--lengths='1,x'" in out.stderr and "Traceback" not in out.stderr
