"""``ablate generate``: an LM run continues a prompt (seeded, the prompt kept), a translation run
translates it; bad input is one clear error."""

from __future__ import annotations

import pytest

from ablate.cli import main
from ablate.errors import ConfigError
from ablate.evaluate.generate import generate_run, lm_prompt_ids


def test_an_lm_run_continues_the_prompt(lm_run_dir):
    text = generate_run(lm_run_dir, "ROMEO:\nWhat", max_new_tokens=20, seed=1)
    assert text.startswith("ROMEO:\nWhat") and len(text) > len("ROMEO:\nWhat")
    assert generate_run(lm_run_dir, "ROMEO:\nWhat", max_new_tokens=20, seed=1) == text  # seeded
    other = {generate_run(lm_run_dir, "ROMEO:\nWhat", max_new_tokens=20, seed=s) for s in range(2, 5)}
    assert other - {text}  # another seed, another sample


@pytest.mark.parametrize("text", ["a\nb", "ROMEO:\n\nWhat light", "one line"])
def test_a_prompt_is_encoded_as_the_lm_stream_holds_text(lm_run_dir, text):
    from ablate.data import build_task
    from ablate.data.lm import _encode
    from ablate.evaluate.load import load_run_model

    cfg, _, _ = load_run_model(lm_run_dir)
    tok = build_task(cfg).tokenizer
    stream = [i for row in _encode({"text": ["previous line", *text.split("\n")]}, tok)["ids"] for i in row]
    prompt = lm_prompt_ids(text, tok)
    # the stream of a file holding those lines, after a line that ended (its EOS), up to the last line's end
    assert prompt == stream[len(tok.encode("previous line")):-1]


def test_a_translation_run_translates(run_dir):
    out = generate_run(run_dir, "A man is riding a bike.", beam=2)
    assert isinstance(out, str) and "\n" not in out
    assert generate_run(run_dir, "A man is riding a bike.", beam=2) == out  # search is deterministic


def test_the_generate_command(lm_run_dir, capsys):
    assert main(["generate", str(lm_run_dir), "--prompt", "KING", "--max-new-tokens", "5", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.startswith("KING")


def test_an_empty_prompt_is_refused(lm_run_dir, capsys):
    with pytest.raises(ConfigError, match="--prompt"):
        generate_run(lm_run_dir, "")
    assert main(["generate", str(lm_run_dir), "--prompt", ""]) == 2
    assert "--prompt" in capsys.readouterr().err
