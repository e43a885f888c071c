"""Config composition, overrides, and the clear errors for bad input."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import ablate
from ablate.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_composes_and_builds(path):
    import torch

    cfg = ablate.load_config(path)
    with torch.device("meta"):
        model = ablate.build_model(cfg)
    assert ablate.count_parameters(model)["total"] > 0


def test_defaults_compose_and_overrides_win(tmp_path):
    (tmp_path / "parent.yaml").write_text("model: {d_model: 128, n_heads: 4}\nseed: 3\n")
    (tmp_path / "child.yaml").write_text("defaults: [parent.yaml]\nmodel: {n_heads: 8}\n")
    cfg = ablate.load_config(tmp_path / "child.yaml", ["seed=5", "model.positional_args.max_len=64",
                                                        "model.positional=learned"])
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.seed) == (128, 8, 5)
    assert cfg.model.positional_args.max_len == 64


def test_big_config_inherits_base():
    cfg = ablate.load_config(REPO / "configs" / "transformer_big.yaml")
    assert (cfg.model.d_model, cfg.model.d_ff, cfg.model.n_heads, cfg.model.dropout) == (1024, 4096, 16, 0.3)
    assert cfg.model.norm_position == "post" and cfg.train.schedule == "noam"


@pytest.mark.parametrize(
    "overrides,pattern",
    [
        (["model.n_head=4"],
         r"command line: model.n_head is not a key; expected a key of 'model'.*did you mean 'n_heads'"),
        (["model.n_heads=four"], r"command line: model.n_heads='four' .*expected a value of type Integer$"),
        (["model.n_heads=5"], r"model.n_heads=5 .*a divisor of model.d_model=512"),
        (["model.d_ff=-1"], r"model.d_ff=-1 .*a positive integer"),
        (["model.positional=sinusodal"], r"model.positional='sinusodal'.*did you mean 'sinusoidal'"),
        (["model.mask_args.widow=3", "model.mask=sliding_window"], r"model.mask_args.widow=3.*\(window\)"),
        (["model.dropout=1.5"], r"model.dropout=1.5.*\[0, 1\)"),
        (["logger=tensorboard"], r"logger='tensorboard' is not allowed; expected one of wandb, none$"),
        (["model.n_heads"], r"an override of the form key=value"),
        (["train.schedule=cosine", "train.schedule_args.warm=3"], r"train.schedule_args.warm=3"),
    ],
)
def test_bad_overrides_name_key_value_and_allowed(overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        ablate.load_config(None, overrides)


def test_n_heads_not_dividing_is_fine_when_d_k_and_d_v_are_given():
    cfg = ablate.load_config(None, ["model.n_heads=5", "model.d_k=64", "model.d_v=64"])
    assert cfg.model.n_heads == 5


def test_error_names_the_file_that_set_the_value(tmp_path):
    (tmp_path / "parent.yaml").write_text("model: {d_model: 100}\n")
    (tmp_path / "child.yaml").write_text("defaults: [parent.yaml]\nmodel: {n_heads: 3}\n")
    with pytest.raises(ConfigError, match=r"child.yaml: model.n_heads=3 .*divisor of model.d_model=100"):
        ablate.load_config(tmp_path / "child.yaml")
    (tmp_path / "typo.yaml").write_text("model: {d_modle: 100}\n")
    with pytest.raises(ConfigError, match=r"typo.yaml: model.d_modle is not a key; expected .*did you mean 'd_model'"):
        ablate.load_config(tmp_path / "typo.yaml")


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="an existing YAML file"):
        ablate.load_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("model: {d_model: [\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: yaml='line \d+'.*valid YAML"):
        ablate.load_config(tmp_path / "bad.yaml")


def test_loaded_config_is_read_only():
    cfg = ablate.load_config(None)
    with pytest.raises(Exception):
        cfg.model.d_model = 3


def test_component_args_given_whole_replace_and_dotted_ones_merge(tmp_path):
    base = REPO / "configs" / "default.yaml"  # schedule_args: {warmup: 400, scale: 2.0}
    switched = ablate.load_config(base, ["train.schedule=constant", "train.schedule_args={warmup: 0}"])
    assert dict(switched.train.schedule_args) == {"warmup": 0}  # no stale noam `scale`
    tweaked = ablate.load_config(base, ["train.schedule_args.warmup=10"])
    assert dict(tweaked.train.schedule_args) == {"warmup": 10, "scale": 2.0}
    (tmp_path / "child.yaml").write_text(f"defaults: [{base}]\n"
                                         "train: {schedule: cosine, schedule_args: {warmup: 5}}\n")
    # min_ratio is cosine's default
    assert dict(ablate.load_config(tmp_path / "child.yaml").train.schedule_args) == {"warmup": 5, "min_ratio": 0.1}


def _ranged_keys(schema: type = None, prefix: str = "") -> dict[str, object]:
    """Every key whose schema field declares a range, with it (walked here, apart from validate's own walk)."""
    import dataclasses

    from ablate.config.schema import RunConfig

    out = {}
    for f in dataclasses.fields(schema or RunConfig):
        if dataclasses.is_dataclass(f.default_factory):
            out.update(_ranged_keys(f.default_factory, f"{prefix}{f.name}."))
        elif "range" in f.metadata:
            out[f"{prefix}{f.name}"] = f.metadata["range"]
    return out


SIZES = {key: int(rng.allowed.rsplit(" ", 1)[1].replace(",", "")) for key, rng in _ranged_keys().items()
         if rng.allowed.startswith("a positive integer up to")}


# Every size, count and step a config sets has an upper bound, refused past it in one line (a typo's extra zeros used to
# build layers until killed).
@pytest.mark.parametrize("key", sorted(SIZES))
def test_every_size_count_and_step_is_bounded(key):
    with pytest.raises(ConfigError, match=rf"{key}={SIZES[key] + 1} is not allowed; expected a positive integer up "
                                          rf"to {SIZES[key]:,}"):
        ablate.load_config(None, [f"{key}={SIZES[key] + 1}"])
    assert _ranged_keys()[key].accepts(SIZES[key]) and not _ranged_keys()[key].accepts(0)


def test_the_sizes_bounded_are_every_model_data_and_step_count():
    assert set(SIZES) == {
        "model.n_layers", "model.n_encoder_layers", "model.n_decoder_layers", "model.d_model", "model.n_heads",
        "model.d_k", "model.d_v", "model.d_ff", "data.vocab_size", "data.batch_size", "data.max_tokens",
        "data.max_len", "data.limit_train", "data.limit_val", "train.max_steps", "train.val_every", "train.log_every"}


@pytest.mark.parametrize("key", sorted(_ranged_keys()))
def test_every_ranged_key_refuses_a_value_outside_its_range_in_one_line(key):
    rng = _ranged_keys()[key]
    bad = next(v for v in (0, -2, 1.5, 2**32, 2**41, math.inf) if not rng.accepts(v))
    with pytest.raises(ConfigError, match=rf"^command line: {re.escape(key)}=.* is not allowed; expected "
                                          rf"{re.escape(rng.allowed)}$"):
        ablate.load_config(None, [f"{key}={bad}"])
