"""Sweep files: the W&B schema plus base, rows and seeds; expansion order; clear errors."""

from __future__ import annotations

import re

from pathlib import Path

import pytest
import yaml

from ablate.errors import ConfigError
from ablate.sweep import load_sweep, plan_sweep, run_config
from tests.conftest import REPO, SHARED_DATA
from tests.sweep.conftest import write_sweep


def test_grid_expands_rows_then_parameters_with_seeds_innermost(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, """
        method: grid
        rows:
          - {name: base}
          - {name: "h=1", model.n_heads: 1, model.d_k: 512, model.d_v: 512}
        parameters:
          model.dropout: {values: [0.0, 0.1]}
          train.label_smoothing: {value: 0.0}
          seed: {values: [0, 1]}
    """))
    points = sweep.points()
    assert len(points) == 2 * 2 * 2
    assert [(p.variant, p.seed) for p in points[:4]] == [
        ("base, dropout=0.0", 0), ("base, dropout=0.0", 1), ("base, dropout=0.1", 0), ("base, dropout=0.1", 1)]
    assert points[4].values == {"model.n_heads": 1, "model.d_k": 512, "model.d_v": 512, "model.dropout": 0.0,
                                "train.label_smoothing": 0.0}
    assert points[4].variant == "h=1, dropout=0.0"  # fixed values do not name variants


def test_nested_wandb_parameters_flatten_to_dotted_keys(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, """
        parameters:
          model:
            parameters:
              n_heads: {values: [2, 4]}
    """))
    assert [p.values for p in sweep.points()] == [{"model.n_heads": 2}, {"model.n_heads": 4}]
    assert sweep.name == "sweep"  # the file's stem when the file has no name


def test_random_is_seeded_capped_and_replicated_over_seeds(tmp_path):
    text = """
        method: random
        run_cap: 6
        parameters:
          model.dropout: {distribution: uniform, min: 0.0, max: 0.3}
          model.d_ff: {distribution: int_uniform, min: 64, max: 256}
          seed: {values: [0, 1]}
    """
    a, b = load_sweep(write_sweep(tmp_path, text)).points(), load_sweep(write_sweep(tmp_path, text)).points()
    assert a == b and len(a) == 6
    assert [p.seed for p in a] == [0, 1] * 3
    assert a[0].values == a[1].values  # each sample is replicated over the seeds
    assert all(0.0 <= p.values["model.dropout"] <= 0.3 and 64 <= p.values["model.d_ff"] <= 256 for p in a)


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("metod: grid\n", r"metod='grid'.*a sweep key"),
        ("method: hyperband\n", r"method='hyperband'.*grid, random, bayes"),
        ("parameters:\n  model.dropout: {distribution: uniform, min: 0, max: 1}\n", r"what W&B's grid search takes"),
        ("rows:\n  - {name: a}\n  - {name: a, model.n_heads: 2}\n", r"rows\[1\].name='a'"),
        ("parameters:\n  model.d_ff: {values: []}\n", r"non-empty list"),
        ("metric: {name: val/loss, goal: lowest}\n", r"minimize or maximize"),
    ],
)
def test_bad_sweep_files_get_one_clear_error(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_sweep(write_sweep(tmp_path, text)).points()


def test_every_run_config_is_validated_before_anything_runs(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, f"""
        base: {REPO / 'configs' / 'default.yaml'}
        parameters:
          model.n_heads: {{values: [4, 5]}}
    """))
    with pytest.raises(ConfigError, match=r"sweep.yaml: model.n_heads=5 .*divisor"):
        plan_sweep(sweep, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_plan_identity_is_stable_and_names_the_changed_factors(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path, f"""
        name: ids
        base: {{config: {REPO / 'configs' / 'default.yaml'}, overrides: [train.max_steps=10]}}
        rows:
          - {{name: base}}
          - {{name: pre, model.norm_position: pre}}
        parameters:
          seed: {{values: [0, 1]}}
    """))
    first, second = plan_sweep(sweep, tmp_path), plan_sweep(sweep, tmp_path)
    assert [r.id for r in first] == [r.id for r in second] and len({r.id for r in first}) == 4
    pre = first[2]
    assert pre.variant == "pre" and pre.varied == {"model.norm_position": "pre"}
    cfg = run_config(sweep, pre.overrides, None, labels=pre.labels)
    assert cfg.wandb.name == "pre, seed=0" and list(cfg.wandb.tags) == ["model.norm_position=pre"]  # key=value
    assert dict(cfg.wandb.study) == {"row": "pre", "variant": "pre", "seed": 0}
    assert cfg.wandb.group == "ids" and cfg.model.norm_position == "pre" and cfg.train.max_steps == 10
    logged = ["logger=wandb"]
    in_folder = run_config(sweep, pre.overrides, tmp_path / "out" / pre.run_dir, logged, pre.labels)
    group = in_folder.wandb.group  # in a sweep folder: the folder's own group, the same at every call
    assert group.startswith("ids-") and run_config(sweep, [], tmp_path / "out/runs/x", logged).wandb.group == group
    assert run_config(sweep, [], tmp_path / "elsewhere/runs/x", logged).wandb.group not in (group, "ids")
    assert run_config(sweep, [], tmp_path / "quiet/runs/x", ["logger=none"]).wandb.group == "ids"  # no W&B: no file
    assert not (tmp_path / "quiet").exists()
    assert pre.parameters == first[0].parameters + 2 * (64 + 64)  # pre-norm: a final LayerNorm per stack


EXPERIMENTS = sorted((REPO / "experiments").glob("*.yaml"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.name for p in EXPERIMENTS])
def test_every_experiment_file_passes_dry_run(path, monkeypatch):
    monkeypatch.chdir(REPO)
    text = path.read_text()
    config = REPO / (yaml.safe_load(text).get("base") or {}).get("config", "")
    texts = [text] + ([config.read_text()] if config.is_file() else [])
    if any("../shared/data" in t for t in texts) and not SHARED_DATA.is_dir():  # evaluate: reads the data's tokenizer
        pytest.skip(f"offline datasets not found at {SHARED_DATA}")
    from ablate.cli.matrix import format_matrix

    sweep = load_sweep(path)
    runs = plan_sweep(sweep, Path("unused"))
    assert runs and len({r.id for r in runs}) == len(runs)
    text = format_matrix(sweep, runs)
    variants = list(dict.fromkeys(r.variant for r in runs))
    family = 2 if "comparisons: " in text else 0  # a crossed design says what it compares, then a blank line
    assert text.count("\n") == len(runs) + 1 + 1 + 1 + family + len(variants)  # title, header, runs; blank, heading,
    # variants
    assert not [r.variant for r in runs if r.same_as]  # no shipped experiment trains one model twice
    header = " ".join(line.lstrip("# ") for line in path.read_text().splitlines() if line.startswith("#"))
    for start in re.findall(r"(\d+) runs to start", header):  # what the file says of itself is what it plans
        assert int(start) == len(runs), f"{path.name} says {start} runs to start; it plans {len(runs)}"
    for most in re.findall(r"runs to start, [^)]*?at most (\d+)", header):
        assert int(most) == sweep.decide.most_runs(len(variants)), f"{path.name}: at most {most}"


# Issue 27, cause 2: a sweep's meaning is read as a whole. Every key a row can set is refused when the parameters
# sweep it too (the row's label would name the parameter's values), whatever the row or the key.
ROW_KEYS = ["model.dropout", "train.lr", "seed", "model.positional"]


@pytest.mark.parametrize("key", ROW_KEYS)
def test_a_row_may_not_set_a_key_the_parameters_sweep(tmp_path, key):
    path = write_sweep(tmp_path, f"""
        rows: [{{name: base}}, {{name: changed, {key}: 1}}]
        parameters:
          {key}: {{values: [0, 1]}}
    """)
    with pytest.raises(ConfigError, match=rf"rows\[1\]\.{key}=1 is not allowed; expected a key that no parameter "
                                          rf"sweeps \(parameters\.{key} sweeps it too"):
        load_sweep(path)


SHAPES = {"value": 0.1, "values": [0.1, 0.2], "min": 0.0}


@pytest.mark.parametrize("pair", [("value", "values"), ("value", "min"), ("values", "min")])
def test_a_parameter_gives_one_shape_of_values(tmp_path, pair):
    spec = {k: SHAPES[k] for k in pair} | ({"max": 0.3} if "min" in pair else {})
    path = write_sweep(tmp_path, f"parameters:\n  model.dropout: {yaml.safe_dump(spec, default_flow_style=True)}")
    with pytest.raises(ConfigError, match=f"this one gives {pair[0]} and {pair[1]}"):
        load_sweep(path)


# Numbers YAML 1.1 (PyYAML, omegaconf) and YAML 1.2 (W&B's server, most editors) read differently: refused in a file
# and in an override alike; the forms both read the same stay numbers.
YAML11_ONLY = {"010": 8, "0_10": 8, "1:30": 90, "-1:30": -90, "1:30.5": 90.5, "1:00:00": 3600}
BOTH_READ = {"10": 10, "07": 7, "0": 0, "0x10": 16, "1e-3": 1e-3, "'010'": "010", "'1:30'": "1:30",
             "run1:30": "run1:30"}


@pytest.mark.parametrize("text", sorted(YAML11_ONLY))
def test_a_number_only_yaml_1_1_reads_so_is_refused_in_a_file_and_an_override(tmp_path, text):
    from ablate.config import load_config
    from ablate.yamlio import load_yaml

    assert yaml.safe_load(text) == YAML11_ONLY[text]  # what PyYAML alone would have made of it
    with pytest.raises(yaml.YAMLError, match="YAML 1.1"):
        load_yaml(f"x: {text}\n")
    with pytest.raises(ConfigError, match="expected a value read the same by every YAML"):
        load_config(None, [f"name={text}"])


@pytest.mark.parametrize("text", sorted(BOTH_READ))
def test_a_number_both_yamls_read_alike_is_read(text):
    from ablate.yamlio import load_yaml

    assert load_yaml(f"x: {text}\n") == {"x": BOTH_READ[text]}
