"""The ``ablate`` command as a user runs it: exit codes, one-line errors, nothing written on bad input.

In-process through :func:`ablate.cli.main` (what the console script calls; ``tests.conftest.ablate_here``); only the
closed pipe needs a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from tests.conftest import REPO, Ran, ablate_here


def ablate(*args: str, cwd: Path = REPO) -> Ran:
    return ablate_here(*args, cwd=cwd)


def test_describe_json_reports_the_paper_parameter_counts():
    base = ablate("describe", "configs/transformer_base.yaml", "data.vocab_size=41000", "--json")
    assert base.returncode == 0, base.stderr
    assert json.loads(base.stdout)["parameters"]["total"] == 65_130_496
    row_b = ablate("describe", "configs/transformer_base.yaml", "data.vocab_size=41000", "model.d_k=16", "--json")
    info = json.loads(row_b.stdout)
    assert info["parameters"]["total"] == 58_038_784
    assert info["dims"]["d_k"] == 16 and info["dims"]["d_v"] == 64


def test_describe_text_shows_config_and_parts():
    out = ablate("describe", "configs/transformer_big.yaml")
    assert out.returncode == 0, out.stderr
    assert "d_model: 1024" in out.stdout and "encoder" in out.stdout and "total" in out.stdout


def test_components_lists_kinds_names_and_parameters():
    out = ablate("components")
    assert out.returncode == 0
    for text in ("positional:", "sinusoidal", "learned", "rope", "mask:", "sliding_window", "window: int = 64",
                 "ffn:", "swiglu", "norm_position:", "pre", "schedule:", "noam", "task:", "reverse"):
        assert text in out.stdout, text
    only = ablate("components", "mask")
    assert "positional:" not in only.stdout and "prefix_lm" in only.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["train", "configs/default.yaml", "model.n_heads=5"], "model.n_heads=5"),
        (["train", "configs/default.yaml", "model.positonal=learned"], "did you mean 'positional'"),
        (["train", "configs/nope.yaml"], "an existing YAML file"),
        (["train", "configs/default.yaml", "model.positional=rope", "model.d_k=7"], "model.d_k=7"),
        (["describe"], "CONFIG"),
        (["components", "colour"], "kind='colour'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    (tmp_path / "configs").symlink_to(REPO / "configs")
    out = ablate(*args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("ablate: error: ")
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs"]  # no runs/ folder


def test_a_config_that_sets_nothing_is_refused_rather_than_training_the_base_model_for_100k_steps(tmp_path):
    import argparse

    from ablate.cli.run import refuse_if_empty

    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match="this one is empty, which would train the paper's base model"):
        refuse_if_empty(argparse.Namespace(items=[str(tmp_path / "empty.yaml")]))
    refuse_if_empty(argparse.Namespace(items=[str(tmp_path / "empty.yaml"), "train.max_steps=10"]))  # an override


def test_a_reader_that_goes_away_is_not_an_internal_error(tmp_path):
    """`ablate components | head -1`: the pipe closes early; ablate stops quietly (141, as a shell reports SIGPIPE)."""
    proc = subprocess.Popen([sys.executable, "-m", "ablate.cli", "components"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) in (0, 141) and "internal error" not in err, err
