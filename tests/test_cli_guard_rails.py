"""Guard rails: a sweep file that says nothing runnable, a number that is not one (inf, NaN), an option that does not
apply to the run it is given for, and an input longer than the model reads. Each mistake is refused by the real
command (:func:`ablate.cli.main`) in one line, exit 2, with nothing written; a language model's long input is read
from its last ``data.max_len`` tokens, with a note."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import ablate
from ablate.cli import COMMANDS, main
from ablate.cli.parser import build_parser
from ablate.options import Number
from ablate.train.run import train
from tests.conftest import REPO, TINY

BASE = f"base: {REPO / 'configs/default.yaml'}\n"
RUN = TINY + ["train.max_steps=2", "train.val_every=2", "trainer.enable_progress_bar=false"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A finished translation-kind run (the embedded reverse task, encoder-decoder), one whose positions are learned
    (at most 16), and a language-model run (random tokens, decoder-only); their data.max_len is 12."""
    out = tmp_path_factory.mktemp("kinds")
    return {"translation": train(ablate.load_config(None, RUN + [f"output_dir={out / 't'}"])),
            "learned": train(ablate.load_config(None, RUN + ["model.positional=learned",
                                                            "model.positional_args.max_len=16",
                                                            f"output_dir={out / 'learned'}"])),
            "lm": train(ablate.load_config(None, RUN + ["model.arch=decoder_only", "data.task=random_lm",
                                                       f"output_dir={out / 'lm'}"]))}


def _state(*folders: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folders`` with its size and modification time: what a refused command leaves as it was."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for folder in folders for p in folder.rglob("*")}


def refused(argv: list[str], message: str, capsys, *folders: Path) -> str:
    """``ablate ARGV`` exits 2 with one line holding ``message``, writing nothing under ``folders``; the line."""
    before = _state(*folders)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("ablate: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert _state(*folders) == before
    return err


# --- sweep files that say nothing runnable (item 6a) ---

SWEEPS = {
    "rows_empty.yaml": (BASE + "rows: []\n", "rows=[] is not allowed; expected at least one row"),
    "ladder_empty.yaml": (BASE + "rows: [{name: base}]\nladder: []\n", "ladder=[] is not allowed; expected at least "
                          "two steps"),
    "plain_wandb.yaml": ("program: train.py\ncommand: [\"${env}\", python, \"${program}\", \"${args}\"]\nmethod: grid\n"
                         "parameters:\n  train.lr: {values: [0.001, 0.002]}\n",
                         "plain_wandb.yaml: base=None is not allowed; expected the config every run starts from, e.g. "
                         "base: configs/default.yaml: without it every run would train the schema's defaults, the "
                         "paper's base model"),
    "base_null.yaml": ("base:\nrows: [{name: base}]\n", "base=None is not allowed"),
    "empty.yaml": ("# to do\n", "SWEEP='empty.yaml' is not allowed; expected a sweep file that sets something (this "
                   "one is empty): base: CONFIG"),
    "ignored.yaml": ("program: train.py\ncommand: [python, train.py]\n", "ignored.yaml: program='train.py' is not "
                     "allowed; expected a key ablate reads: program, command are for W&B's agents"),
}


@pytest.mark.parametrize("name", SWEEPS)
@pytest.mark.parametrize("dry", [False, True])
def test_a_sweep_file_that_says_nothing_runnable_is_refused(name, dry, tmp_path, monkeypatch, capsys):
    text, message = SWEEPS[name]
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    err = refused(["sweep", name, *(["--dry-run"] if dry else [])], message, capsys, tmp_path)
    assert "base: CONFIG" in err or "base: configs/" in err or "at least" in err  # what to write
    assert not (tmp_path / "sweeps").exists()


def test_a_plain_w_and_b_file_runs_once_it_names_its_base(tmp_path, monkeypatch, capsys):
    text, _ = SWEEPS["plain_wandb.yaml"]
    (tmp_path / "s.yaml").write_text(BASE + text)
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "s.yaml", "--dry-run"]) == 0
    assert "program, command not used" in capsys.readouterr().err  # still said, in its one warning line


# --- numbers that are not numbers (item 6b) ---

# Numbers read by plain int or float, each checked with the sweep file's key of the same setting: --max-seeds as
# decide.max_seeds (its range is the design's), Slurm's as the file's slurm: section (ablate.sweep.slurm_settings,
# which refuses inf and NaN). An int parse refuses inf and NaN itself.
KEEP = {("sweep", "--max-seeds"), ("sweep", "--mem-per-run"), ("sweep", "--time-limit"), ("sweep", "--max-jobs")}


def _numeric_options() -> list[tuple[str, argparse.Action]]:
    _, subparsers = build_parser(COMMANDS)
    return [(name, action) for name, p in subparsers.items() for action in p._actions
            if isinstance(action.type, Number) or action.type in (int, float)]


def _argv(command: str, option: str, value: str) -> list[str]:
    """``command`` with a placeholder for each positional and required option, then ``option=value`` (``-inf``
    alone would read as an option)."""
    _, subparsers = build_parser(COMMANDS)
    words = [command]
    for action in subparsers[command]._actions:
        if not action.option_strings and action.nargs not in ("?", "*", argparse.SUPPRESS) and action.dest != "help":
            words.append("x")
        elif action.option_strings and action.required:
            words += [action.option_strings[0], "x"]
    return words + [f"{option}={value}"]


def test_every_numeric_option_is_read_by_the_shared_type():
    options = _numeric_options()
    assert len(options) >= 15  # temperature, top-k, seed, beam (twice), alpha, lengths' kin, workers, shares, ...
    plain = {(name, a.option_strings[0]) for name, a in options if a.type in (int, float)}
    assert plain == KEEP, plain


@pytest.mark.parametrize("command, option", [(name, a.option_strings[0]) for name, a in _numeric_options()
                                             if (name, a.option_strings[0]) not in KEEP])
@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e999"])
def test_no_numeric_option_takes_a_number_that_is_not_finite(command, option, value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    refused(_argv(command, option, value), f"argument {option}: '{value}' is not allowed; expected a", capsys,
            tmp_path)


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_generate_with_an_infinite_temperature_samples_nothing(value, runs, tmp_path, monkeypatch, capsys):
    """The issue's command: `ablate generate RUN --temperature inf` sampled noise and exited 0."""
    monkeypatch.chdir(tmp_path)
    refused(["generate", str(runs["lm"]), "--prompt", "3 4 5", "--temperature", value],
            f"argument --temperature: '{value}' is not allowed; expected a finite number >= 0 (0: greedy)", capsys,
            tmp_path, runs["lm"])


# --- an option for the other kind of run (item 6c) ---

WRONG_KIND = [
    ("lm", ["generate", "{run}", "--prompt", "3 4", "--beam", "2"], "--beam=2 is not allowed; expected nothing for "
     "this run: --beam is for translation runs (encoder-decoder), and {run} is one of language-model runs"),
    ("translation", ["generate", "{run}", "--prompt", "3 4", "--temperature", "0.5"],
     "--temperature=0.5 is not allowed; expected nothing for this run: --temperature is for language-model runs"),
    ("translation", ["generate", "{run}", "--prompt", "3 4", "--top-k", "5"], "--top-k=5 is not allowed"),
    ("translation", ["generate", "{run}", "--prompt", "3 4", "--seed", "3"], "--seed=3 is not allowed"),
    ("translation", ["generate", "{run}", "--prompt", "3 4", "--max-new-tokens", "5"], "--max-new-tokens=5"),
    ("lm", ["evaluate", "{run}", "--beam", "2"], "--beam=2 is not allowed; expected nothing for this run"),
    ("lm", ["evaluate", "{run}", "--alpha", "1"], "--alpha=1.0 is not allowed"),
    ("lm", ["evaluate", "{run}", "--split", "val"], "--split='val' is not allowed"),
    ("lm", ["evaluate", "{run}", "--batch-tokens", "64"], "--batch-tokens=64 is not allowed"),
    ("translation", ["evaluate", "{run}", "--lengths", "1,2"], "--lengths='1,2' is not allowed; expected nothing for "
     "this run: --lengths is for language-model runs"),
    ("lm", ["attention", "{run}", "--text", "3 4", "--target", "4 3", "--out", "a.png"],
     "--target='4 3' is not allowed; expected nothing for this run: --target is for translation runs"),
]


@pytest.mark.parametrize("kind, argv, message", WRONG_KIND, ids=[" ".join(a[:1] + a[2:]) for _, a, _ in WRONG_KIND])
def test_an_option_for_the_other_kind_of_run_is_refused(kind, argv, message, runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run = str(runs[kind])
    refused([a.format(run=run) for a in argv], message.format(run=run), capsys, tmp_path, runs[kind])


def test_the_options_of_its_own_kind_still_apply(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["generate", str(runs["lm"]), "--prompt", "3 4", "--temperature", "0", "--max-new-tokens", "2",
                 "--top-k", "3", "--seed", "1"]) == 0
    assert main(["generate", str(runs["translation"]), "--prompt", "3 4 5", "--beam", "2"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and len(out.out.splitlines()) == 2


def test_a_sweep_s_evaluate_option_for_the_other_kind_is_refused_before_it_starts(tmp_path, monkeypatch, capsys):
    """`evaluate: {beam: 4}` on language-model runs: every run would train, then fail its evaluation."""
    (tmp_path / "text.txt").write_text("To be, or not to be, that is the question.\n" * 50)
    (tmp_path / "lm.yaml").write_text(f"base: {{config: {REPO / 'configs/tinyshakespeare.yaml'}, overrides: "
                                      f"[data.path={tmp_path / 'text.txt'}]}}\nrows: [{{name: base}}]\n"
                                      "evaluate: {beam: 4}\n")
    monkeypatch.chdir(tmp_path)
    refused(["sweep", "lm.yaml", "--dry-run"], "lm.yaml: evaluate.beam=4 is not allowed; expected nothing for these "
            "runs: beam is for translation runs", capsys, tmp_path)


# --- an input longer than the model reads (item 6c) ---

LONG = " ".join(str(3 + i % 20) for i in range(20))  # 20 symbols; the runs read 12 at once (data.max_len)


def test_a_language_model_reads_a_long_prompt_from_its_end_and_says_so(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["generate", str(runs["lm"]), "--prompt", LONG, "--max-new-tokens", "2", "--temperature", "0"]) == 0
    out = capsys.readouterr()
    assert out.err == ("ablate: note: --prompt is 20 tokens, more than the 12 the run's model reads at once "
                       "(data.max_len): it reads the last 12\n")
    assert out.out.split()[:20] == LONG.split()  # the prompt as given, then what the model added
    assert main(["attention", str(runs["lm"]), "--text", LONG, "--out", "a.png"]) == 0
    assert "--text is 20 tokens" in capsys.readouterr().err and (tmp_path / "a.png").is_file()


def test_a_translation_s_long_source_is_refused(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    refused(["generate", str(runs["learned"]), "--prompt", LONG], "expected text the run's model can encode: this is "
            "20 tokens, and LearnedPositional encodes at most 16 positions", capsys, tmp_path, runs["learned"])
