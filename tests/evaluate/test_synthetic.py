"""Inspecting a run of the embedded default task (reverse): generate and attention read and write its symbols as
numbers; a run without best.ckpt falls back to last.ckpt and says so; evaluate names the run's path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import ablate
from ablate.cli import main
from ablate.data.symbols import Symbols
from ablate.decode import translate
from ablate.errors import ConfigError
from ablate.evaluate.attention_plot import collect
from ablate.evaluate.average import load_state_dict
from ablate.model import build_model
from ablate.train.run import train
from tests.conftest import REPO

PROMPT = "3 4 5 6 7"


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory) -> Path:
    """A tiny reversal run (symbols 3 to 8, 3 to 5 of them) of 60 steps that validates only at its last one
    (val_every 1000); enough steps to write symbols before its first EOS."""
    tmp = tmp_path_factory.mktemp("reverse-run")
    cfg = ablate.load_config(REPO / "configs/default.yaml", [
        "logger=none", "trainer.enable_progress_bar=false", "model.n_layers=1", "model.d_model=32",
        "train.max_steps=60", "train.val_every=1000", "train.schedule_args.warmup=30", "data.max_len=5",
        "data.vocab_size=9", "data.task_args={n_train: 640, n_val: 64, min_len: 3}", f"output_dir={tmp / 'run'}"])
    return train(cfg)


def _reference(run_dir: Path, checkpoint: str, src: list[int]) -> str:
    """The model's beam-4 output for ``src``, from the checkpoint's weights, its symbols written as numbers."""
    cfg = ablate.load_config(run_dir / "config.yaml")
    model = build_model(cfg)
    state = load_state_dict(run_dir / "checkpoints" / f"{checkpoint}.ckpt")
    model.load_state_dict({k[len("model."):]: v for k, v in state.items() if k.startswith("model.")})
    d = cfg.data
    (out,) = translate(model.float().eval(), [src], bos_id=d.bos_id, eos_id=d.eos_id, pad_id=d.pad_id, beam=4)
    return " ".join(str(i) for i in out if i >= 3)


def test_symbols_read_and_write_numbers_and_name_what_they_read():
    s = Symbols(3, 24, pad_id=0, bos_id=1, eos_id=2)
    assert s.encode(" 3 17\n9 ") == [3, 17, 9] and s.decode([1, 3, 17, 9, 2, 0]) == "3 17 9"
    assert [s.piece(i) for i in (0, 1, 2, 23)] == ["<pad>", "<s>", "</s>", "23"]
    for bad in ("hello", "2 3", "3 24", "3.5"):
        with pytest.raises(ValueError, match="whole numbers from 3 to 23"):
            s.encode(bad)


def test_a_reversal_run_generates_its_output_as_numbers(reverse_run, capsys):
    assert main(["generate", str(reverse_run), "--prompt", PROMPT, "--device", "cpu"]) == 0
    out = capsys.readouterr()
    expected = _reference(reverse_run, "best", [3, 4, 5, 6, 7])
    assert expected and out.out.rstrip("\n") == expected and "note" not in out.err


def test_a_reversal_run_draws_its_attention_over_its_symbols(reverse_run, tmp_path, capsys):
    panels = collect(reverse_run, PROMPT, target="7 6 5 4 3")
    assert [p.title for p in panels] == ["encoder self 1", "decoder self 1", "decoder cross 1"]
    assert panels[0].queries == PROMPT.split() and panels[1].queries == ["<s>", "7", "6", "5", "4", "3"]
    assert all(torch.allclose(p.weights.sum(-1), torch.ones(())) for p in panels)  # each query's weights sum to 1
    assert main(["attention", str(reverse_run), "--text", PROMPT, "--out", str(tmp_path / "a.png")]) == 0
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_a_prompt_that_is_not_symbols_is_one_line_naming_what_is_read(reverse_run, capsys):
    assert main(["generate", str(reverse_run), "--prompt", "hello"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ablate: error: command line: --prompt='hello' is not allowed; expected symbols as whole "
                          "numbers from 3 to 8") and len(err.splitlines()) == 1


def test_a_run_without_best_falls_back_to_last_and_says_so(reverse_run, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(reverse_run, copy)
    (copy / "checkpoints" / "best.ckpt").unlink()  # as a run stopped before its first validation
    assert main(["generate", str(copy), "--prompt", PROMPT, "--device", "cpu"]) == 0
    out = capsys.readouterr()
    assert out.out.rstrip("\n") == _reference(copy, "last", [3, 4, 5, 6, 7])
    assert (f"ablate: note: {copy / 'checkpoints'} has no best.ckpt (the run never validated): "
            "using last.ckpt") in out.err
    assert main(["generate", str(copy), "--prompt", PROMPT, "--checkpoint", "best"]) == 2  # asked for: no fallback
    assert "--checkpoint='best' is not allowed" in capsys.readouterr().err


def test_evaluate_names_the_run_s_path_for_a_task_without_text_to_score(reverse_run):
    from ablate.evaluate.evaluate import evaluate_run

    with pytest.raises(ConfigError) as err:
        evaluate_run(reverse_run, device="cpu")
    assert err.value.key == "RUN_DIR" and err.value.value == str(reverse_run) and "'reverse'" in str(err.value)
