"""``ablate attention``: one panel per attention module (layers x heads), rows of real weights,
a PNG written atomically."""

from __future__ import annotations

import pytest
import torch
from matplotlib.image import imread

from ablate.cli import main
from ablate.errors import ConfigError
from ablate.evaluate.attention_plot import collect, plot_attention


def test_translation_panels_cover_every_module_and_are_distributions(run_dir):
    panels = collect(run_dir, "A dog runs on the beach.", target="Ein Hund rennt am Strand.")
    assert [p.title for p in panels] == ["encoder self 1", "decoder self 1", "decoder cross 1"]
    enc, dec, cross = panels
    S, T = len(enc.keys), len(dec.queries)
    assert enc.weights.shape == (4, S, S) and dec.weights.shape == (4, T, T) and cross.weights.shape == (4, T, S)
    assert dec.queries[0] == "<s>" and cross.keys == enc.keys
    for p in panels:
        assert torch.allclose(p.weights.sum(-1), torch.ones(p.weights.shape[:-1]), atol=1e-5)
    assert torch.all(dec.weights.triu(1) == 0)  # causal: nothing above the diagonal


def test_an_lm_run_draws_its_decoder_and_the_png_is_written(lm_run_dir, tmp_path):
    panels = collect(lm_run_dir, "ROMEO:\nWhat light")
    assert [p.title for p in panels] == ["decoder self 1"]
    out = plot_attention(lm_run_dir, "ROMEO:\nWhat light", tmp_path / "grid.png")
    image = imread(out)
    assert out == tmp_path / "grid.png" and image.shape[0] > 100 and image.shape[1] > 4 * 100
    assert not list(tmp_path.glob("*.tmp"))


def test_the_attention_command(run_dir, capsys):
    assert main(["attention", str(run_dir), "--text", "Two people walk."]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "attention.png")
    assert (run_dir / "attention.png").stat().st_size > 0


def test_empty_text_is_refused(run_dir):
    with pytest.raises(ConfigError, match="--text"):
        collect(run_dir, "   ")
