"""A path written in a file is looked for beside that file, then in ablate's shipped folder, wherever the shell stands;
a file in neither is one line naming the key, the value and every folder looked in; the run records the folders its
data and imports were found in (``paths``), which is no part of its identity."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ablate.config import load_config
from ablate.data import build_task
from ablate.errors import ConfigError
from ablate.paths import search_path, shipped_root
from ablate.runs.files import config_hash
from ablate.sweep import load_sweep
from ablate.sweep.inline import inline_sweep
from ablate.sweep.plan import run_config

REPO = Path(__file__).resolve().parents[2]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """The shell stands in a folder that is neither the study's nor the clone's."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_the_search_path_is_the_naming_files_folder_then_the_shipped_folder(tmp_path, elsewhere):
    assert shipped_root() == REPO  # a checkout (and pip install -e .): the clone's root holds configs/, experiments/
    assert search_path(tmp_path) == [tmp_path, REPO, elsewhere]  # the current folder last, as before
    assert search_path(None) == [REPO, elsewhere]
    assert search_path(elsewhere) == [elsewhere, REPO]


def test_a_sweep_file_outside_the_clone_names_a_shipped_config_by_name(tmp_path, elsewhere):
    sweep = _write(tmp_path / "study" / "mystudy.yaml", "name: s\nbase: configs/default.yaml\n")
    assert Path(load_sweep(sweep).base_config) == REPO / "configs" / "default.yaml"


def test_a_config_beside_the_sweep_file_wins_over_the_shipped_one(tmp_path, elsewhere):
    own = _write(tmp_path / "study" / "configs" / "default.yaml", "model: {d_model: 32, n_heads: 4}\n")
    sweep = _write(tmp_path / "study" / "mystudy.yaml", "name: s\nbase: configs/default.yaml\n")
    assert Path(load_sweep(sweep).base_config) == own


def test_a_missing_base_config_names_the_key_and_every_folder_looked_in(tmp_path, elsewhere):
    study = tmp_path / "study"
    sweep = _write(study / "mystudy.yaml", "name: s\nbase: configs/nope.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_sweep(sweep)
    message = str(err.value)
    assert err.value.key == "base.config" and "\n" not in message
    assert message == (f"{sweep}: base.config='configs/nope.yaml' is not allowed; expected an existing YAML file "
                       f"(looked in {study}, {REPO}, {elsewhere})")


def test_a_missing_config_on_the_command_line_names_the_current_folder_and_the_shipped_one(elsewhere):
    with pytest.raises(ConfigError, match=rf"config='nope.yaml' .*\(looked in {elsewhere}, {REPO}\)$"):
        load_config("nope.yaml")


def test_a_shipped_config_is_found_by_name_from_any_folder(elsewhere):
    assert load_config("configs/default.yaml").data.task == "reverse"


def test_defaults_are_relative_to_the_config_then_the_shipped_folder(tmp_path, elsewhere):
    configs = tmp_path / "study" / "configs"
    _write(configs / "parent.yaml", "model: {d_model: 96, n_heads: 4}\n")
    child = _write(configs / "child.yaml", "defaults: [parent.yaml, configs/default.yaml]\nseed: 7\n")
    cfg = load_config(child)
    assert (cfg.model.d_model, cfg.data.task, cfg.seed) == (64, "reverse", 7)  # default.yaml merged after parent
    broken = _write(configs / "broken.yaml", "defaults: [gone.yaml]\n")
    with pytest.raises(ConfigError) as err:
        load_config(broken)
    assert str(err.value) == (f"{broken}: defaults='gone.yaml' is not allowed; expected an existing YAML file "
                              f"(looked in {configs}, {REPO}, {elsewhere})")


def _lm_config(path: Path, data_path: str) -> Path:
    return _write(path, f"""
        defaults: [configs/default.yaml]
        data: {{task: text_lm, task_args: {{train_fraction: 0.5}}, path: {data_path}, vocab_size: 30}}
    """)


def test_a_relative_data_path_is_found_beside_the_config_that_sets_it(tmp_path, elsewhere):
    study = tmp_path / "study"
    _write(study / "data" / "text.txt", "to be or not to be\nthat is the question\n")
    cfg = load_config(_lm_config(study / "configs" / "lm.yaml", "../data/text.txt"))
    assert cfg.data.path == "../data/text.txt"  # as written: the run's identity keeps it
    assert list(cfg.paths.data) == [str(study / "configs"), str(REPO), str(elsewhere)]
    assert build_task(cfg).cfg.path == str(study / "configs" / "../data/text.txt")


def test_a_data_path_on_the_command_line_is_found_from_the_current_folder(tmp_path, elsewhere):
    _write(elsewhere / "mine.txt", "a b c\nd e f\n")
    cfg = load_config(_lm_config(tmp_path / "study" / "lm.yaml", "../nowhere.txt"), ["data.path=./mine.txt"])
    assert list(cfg.paths.data) == [str(elsewhere), str(REPO)]
    assert build_task(cfg).cfg.path == str(elsewhere / "mine.txt")


def test_a_data_path_in_no_folder_names_the_key_and_the_folders(tmp_path, elsewhere):
    configs = tmp_path / "study" / "configs"
    cfg = load_config(_lm_config(configs / "lm.yaml", "../data/none.txt"))
    with pytest.raises(ConfigError) as err:
        build_task(cfg)
    assert str(err.value) == ("data.path='../data/none.txt' is not allowed; expected an existing file or folder "
                              f"(looked in {configs}, {REPO}, {elsewhere})")


def test_a_runs_config_yaml_keeps_the_folders_it_recorded(tmp_path, elsewhere):
    """The run's processes load config.yaml from the run folder: its data is still found beside the study's config."""
    study = tmp_path / "study"
    _write(study / "data" / "text.txt", "to be or not to be\nthat is the question\n")
    cfg = load_config(_lm_config(study / "configs" / "lm.yaml", "../data/text.txt"))
    run = _write(tmp_path / "runs" / "r" / "config.yaml", OmegaConf.to_yaml(cfg))
    again = load_config(run)
    assert list(again.paths.data) == list(cfg.paths.data)
    assert build_task(again).cfg.path == str(study / "configs" / "../data/text.txt")


def test_the_folders_a_run_recorded_are_no_part_of_its_identity(tmp_path, elsewhere):
    cfg = load_config("configs/default.yaml")
    moved = OmegaConf.merge(cfg, {"paths": {"data": [str(tmp_path)], "imports": [str(tmp_path)]}})
    assert config_hash(moved) == config_hash(cfg)


def _module(folder: Path, name: str) -> Path:
    """A module registering an FFN variant named ``name`` (the module's name too)."""
    return _write(folder / f"{name}.py", f'''
        from torch import nn

        from ablate import register
        from ablate.components.feedforward import FeedForward


        @register("ffn", "{name}")
        def tanh_ffn(*, d_model: int, d_ff: int, bias: bool = True) -> FeedForward:
            """FFN with tanh in place of ReLU."""
            return FeedForward(d_model=d_model, d_ff=d_ff, activation=nn.Tanh(), bias=bias)
    ''')


def test_a_configs_imports_are_found_beside_it_and_recorded(tmp_path, elsewhere):
    configs = tmp_path / "study" / "configs"
    _module(configs, "paths_beside_config")
    path = _write(configs / "x.yaml", "defaults: [configs/default.yaml]\nimports: [paths_beside_config]\n"
                                      "model: {ffn: paths_beside_config}\n")
    cfg = load_config(path)
    assert str(configs) in list(cfg.paths.imports)


def test_a_sweep_files_top_level_imports_apply_to_every_row_and_are_found_beside_it(tmp_path, elsewhere):
    study = tmp_path / "study"
    _module(study, "paths_beside_sweep")
    sweep = load_sweep(_write(study / "s.yaml", """
        name: s
        imports: [paths_beside_sweep]
        base: configs/default.yaml
        rows: [{name: base}, {name: tanh, model.ffn: paths_beside_sweep}]
    """))
    cfg = run_config(sweep, ["model.ffn=paths_beside_sweep"], None)
    assert list(cfg.imports) == ["paths_beside_sweep"] and list(cfg.paths.imports) == [str(study)]
    run = _write(tmp_path / "runs" / "r" / "config.yaml", OmegaConf.to_yaml(cfg))
    assert list(load_config(run).paths.imports) == [str(study)]  # what the run's own process imports from


def test_a_module_in_no_folder_names_the_folders_looked_in(tmp_path, elsewhere):
    study = tmp_path / "study"
    sweep = load_sweep(_write(study / "s.yaml", "name: s\nimports: [paths_nowhere]\nbase: configs/default.yaml\n"))
    with pytest.raises(ConfigError) as err:
        run_config(sweep, [], None)
    assert err.value.key == "imports" and f"looked in {elsewhere}, {study}" in str(err.value)
    assert str(err.value).startswith(f"{study / 's.yaml'}: imports='paths_nowhere'")


@pytest.mark.parametrize("imports", ["[1]", "{a: b}", "['']"])
def test_a_sweep_files_imports_are_module_names(tmp_path, imports):
    path = _write(tmp_path / "s.yaml", f"name: s\nimports: {imports}\nbase: configs/default.yaml\n")
    with pytest.raises(ConfigError, match=r"imports=.* expected a module name, or a list of them"):
        load_sweep(path)


def test_a_shipped_sweep_file_and_config_on_the_command_line_are_found_from_any_folder(elsewhere):
    """``ablate sweep experiments/quickstart.yaml`` and ``ablate sweep configs/default.yaml --rows ...`` from a study
    folder: the current folder first, then the shipped folder."""
    assert Path(load_sweep("experiments/quickstart.yaml").path) == REPO / "experiments" / "quickstart.yaml"
    sweep = inline_sweep("configs/default.yaml", ["model.ffn=relu,swiglu"], seeds=2, margin=None, name=None,
                         overrides=[])
    assert Path(sweep["base"]["config"]) == REPO / "configs" / "default.yaml"
    assert [row["name"] for row in sweep["rows"]] == ["base", "ffn=swiglu"]


@pytest.mark.parametrize("key, call", [
    ("SWEEP", lambda: load_sweep("nope.yaml")),
    ("CONFIG", lambda: inline_sweep("nope.yaml", ["model.ffn=swiglu"], seeds=2, margin=None, name=None,
                                    overrides=[])),
])
def test_a_missing_file_on_the_command_line_names_its_key_and_the_folders_looked_in(elsewhere, key, call):
    with pytest.raises(ConfigError, match=rf"{key}='nope.yaml' .*\(looked in {elsewhere}, {REPO}\)$") as err:
        call()
    assert err.value.key == key and "\n" not in str(err.value)
