"""End to end on a slice of Multi30k: train a tiny model, log val/bleu while training, keep the last
step checkpoints (``train.keep_checkpoints``), then ``evaluate_run`` and ``ablate evaluate`` translate,
score and record."""

from __future__ import annotations

import argparse

import pytest

from ablate.errors import ConfigError
from ablate.evaluate import add_evaluate_parser, evaluate_run
from ablate.runs.files import step_checkpoints
from ablate.runs.files import read_metrics
from tests.conftest import result_of

TEST_LINES = 1000  # test_2016_flickr


def test_val_bleu_is_logged_at_every_validation_and_the_last_steps_are_kept(run_dir):
    assert [r["step"] for r in read_metrics(run_dir) if "val/bleu" in r] == [6, 12]  # the steps done
    assert [p.name for p in step_checkpoints(run_dir)] == ["step-8.ckpt", "step-12.ckpt"]


def test_evaluate_run_writes_translations_and_merges_bleu_into_the_result(run_dir):
    out = evaluate_run(run_dir, beam=2, max_len_b=5)
    lines = (run_dir / "translations.test.txt").read_text().split("\n")
    assert len(lines) == TEST_LINES + 1 and lines[-1] == ""  # one line per sentence, newline-terminated
    result = result_of(run_dir)
    assert result["status"] == "finished" and "final" in result  # merged, not replaced
    assert result["test/bleu"] == out["test/bleu"] and 0.0 <= result["test/bleu"] <= 100.0
    assert result["test/bleu_signature"].startswith("nrefs:1|") and "tok:13a" in result["test/bleu_signature"]
    decode = result["decode"]
    assert decode["beam"] == 2 and decode["alpha"] == 0.6 and decode["checkpoints"] == ["best.ckpt"]
    assert decode["sentences"] == TEST_LINES and decode["translations"] == str(run_dir / "translations.test.txt")


def test_evaluate_run_averages_the_last_checkpoints(run_dir):
    out = evaluate_run(run_dir, split="val", beam=1, average_last=2, max_len_b=5)
    assert (out["decode"]["checkpoints"] == [p.name for p in step_checkpoints(run_dir)]
            and out["decode"]["search"] == "greedy")
    assert len((run_dir / "translations.val.txt").read_text().splitlines()) == 40
    assert "val/bleu" in result_of(run_dir)
    with pytest.raises(ConfigError, match="average-last=3"):
        evaluate_run(run_dir, average_last=3)


def test_the_evaluate_command_prints_the_bleu_line_and_the_translations(run_dir, capsys):
    parser = argparse.ArgumentParser(prog="ablate")
    add_evaluate_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["evaluate", str(run_dir), "--split", "val", "--beam", "1"])
    assert args.func(args) == 0
    bleu_line, path = capsys.readouterr().out.strip().splitlines()
    assert bleu_line.startswith("BLEU|nrefs:1|") and path == str(run_dir / "translations.val.txt")


def test_a_folder_without_a_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="RUN_DIR"):
        evaluate_run(tmp_path)


def _copy(run_dir, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("wandb"))
    return copy


def test_a_truncated_checkpoint_is_named_in_one_line(run_dir, tmp_path):
    copy = _copy(run_dir, tmp_path)
    last = copy / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    with pytest.raises(ConfigError, match=r"checkpoint='.*last\.ckpt' is not allowed; expected a Lightning checkpoint"):
        evaluate_run(copy, checkpoint="last")


def test_weights_that_do_not_fit_the_config_are_one_line_naming_the_checkpoint(run_dir, tmp_path):
    copy = _copy(run_dir, tmp_path)
    config = copy / "config.yaml"
    config.write_text(config.read_text().replace("d_ff: 64", "d_ff: 96"))
    with pytest.raises(ConfigError,
                       match=r"expected weights that fit .*config\.yaml \(they do not: size mismatch") as err:
        evaluate_run(copy, checkpoint="last")
    assert "\n" not in str(err.value)
