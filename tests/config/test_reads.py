"""No silent no-ops: a key set on the command line or by a sweep that the run does not read is refused.

Generated from the registry: every variant reads the keys it declares (none of them is refused when that
variant is chosen), and each built-in task reads no data key it does not declare (a recording proxy
watches the data section while the task loads and batches).
"""

from __future__ import annotations

import textwrap

import pytest
from omegaconf import OmegaConf

import ablate
from ablate import registry
from ablate.config.reads import CORE_READS, component_keys, effective
from ablate.errors import NoEffect
from tests.conftest import REPO, ablate_here


@pytest.mark.parametrize("overrides,message", [
    (["data.path=x"], r"data.path='x' has no effect: task 'reverse' does not read data.path; "
                      r"data.task=parallel_text\|text_lm"),
    (["data.max_tokens=100"], r"task 'reverse' does not read data.max_tokens"),
    (["logger=none", "wandb.project=p"], r"wandb.project='p' has no effect: logger=none logs nothing to W&B"),
    (["train.checkpoint_every=5"], r"train.keep_checkpoints=0 keeps no step checkpoints"),
    (["model.arch=decoder_only", "model.n_encoder_layers=2"], r"decoder_only has no encoder"),
    (["model.norm_position=rezero", "model.norm=rmsnorm"], r"norm_position 'rezero' does not read model.norm"),
])
def test_a_key_the_run_does_not_read_is_refused_with_the_reason(overrides, message):
    with pytest.raises(NoEffect, match=message):
        ablate.load_config(REPO / "configs/default.yaml", overrides)


def test_the_same_keys_are_accepted_where_they_are_read():
    cfg = ablate.load_config(REPO / "configs/default.yaml", ["train.schedule=constant", "train.lr=1e-4",
                                                              "train.schedule_args={warmup: 0}"])
    assert cfg.train.lr == 1e-4
    assert ablate.load_config(REPO / "configs/default.yaml", ["train.lr=1e-4"]).train.lr == 1e-4  # noam's peak
    ablate.load_config(REPO / "configs/default.yaml", ["train.keep_checkpoints=2", "train.checkpoint_every=5"])
    ablate.load_config(REPO / "configs/default.yaml", ["model.norm_position=pre", "model.norm=rmsnorm"])


def test_keys_in_config_files_are_not_checked(tmp_path):
    """A base config may carry keys for other variants (configs compose); only what a user sets on top is."""
    (tmp_path / "c.yaml").write_text(f"defaults: [{REPO / 'configs/default.yaml'}]\ntrain: {{lr: 0.5}}\n")
    assert ablate.load_config(tmp_path / "c.yaml").train.lr == 0.5


VARIANT_READS = [(e.kind, e.name, key) for kind in registry.kinds() for e in registry.entries(kind)
                 for key in sorted(e.reads() - CORE_READS) if not key.endswith(".") and key.startswith("model.")]


@pytest.mark.parametrize("kind,name,key", VARIANT_READS, ids=[f"{k}={n}:{key}" for k, n, key in VARIANT_READS])
def test_no_variant_is_refused_a_key_it_reads(kind, name, key):
    base = ablate.load_config(None, [f"{registry.kind(kind).key}={name}"])
    value = effective(base).get(key, OmegaConf.select(base, key))  # d_k, d_v resolved from d_model / h
    assert value is not None, key
    ablate.load_config(None, [f"{registry.kind(kind).key}={name}", f"{key}={value}"])  # does not raise


def test_every_tracked_key_is_a_schema_key():
    schema = OmegaConf.to_container(ablate.load_config(None))
    for key in component_keys():
        node = schema
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, key
            node = node[part]


class Recording:
    """A data section that notes which keys are read."""

    def __init__(self, cfg, seen: set[str]):
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "_seen", seen)

    def __getattr__(self, name):
        self._seen.add(f"data.{name}")
        return getattr(self._cfg, name)

    def __getitem__(self, name):
        return self.__getattr__(name)


TASK_SETTINGS = {
    "reverse": [], "copy": [], "sort": [], "random_lm": ["model.arch=decoder_only"],
    "parallel_text": ["data.path={shared}/multi30k", "data.cache_dir={tmp}", "data.limit_train=200",
                      "data.limit_val=20", "data.vocab_size=200"],
    "text_lm": ["model.arch=decoder_only", "data.path={shared}/tinyshakespeare/input.txt", "data.cache_dir={tmp}",
                "data.limit_train=50",
                "data.limit_val=5", "data.vocab_size=200", "data.max_len=32"],
}


@pytest.mark.parametrize("task", registry.names("task"))
def test_a_task_reads_no_data_key_it_does_not_declare(task, shared_data, tmp_path):
    overrides = [o.format(shared=shared_data, tmp=tmp_path) for o in TASK_SETTINGS[task]]
    cfg = ablate.load_config(None, [f"data.task={task}", *overrides])
    seen: set[str] = set()
    module = registry.create("task", task, {"data": Recording(cfg.data, seen), "seed": 0},
                             OmegaConf.to_container(cfg.data.task_args))
    module.setup("fit")
    next(iter(module.train_dataloader())), next(iter(module.val_dataloader()))
    declared = registry.get("task", task).reads() | CORE_READS
    assert seen <= declared, sorted(seen - declared)  # what it reads, it declares (so no set key is refused wrongly)
    assert {k for k in declared - CORE_READS if k.startswith("data.")} <= seen  # and it declares nothing it ignores


def test_a_sweep_over_a_key_the_run_ignores_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "s.yaml").write_text(textwrap.dedent(f"""
        name: tokens
        base: {REPO / 'configs/default.yaml'}
        parameters:
          data.max_tokens: {{values: [1000, 2000]}}
    """))
    out = ablate_here("sweep", "s.yaml", "--dry-run", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "data.max_tokens=1000 has no effect: task 'reverse' does not read data.max_tokens" in out.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "s.yaml"]


def test_effective_config_drops_what_is_not_read_and_resolves_d_k():
    a = effective(ablate.load_config(None, ["model.d_k=64", "model.d_v=64", "name=x"]))
    b = effective(ablate.load_config(None, ["wandb.project=elsewhere"]))
    assert a == b  # d_k: null means d_model / h = 64; names and W&B settings train nothing
    assert "data.max_tokens" not in a  # the reverse task does not read it
    assert effective(ablate.load_config(None, ["model.dropout=0.2"])) != b


def test_dry_run_flags_rows_that_train_the_same_model(tmp_path):
    (tmp_path / "s.yaml").write_text(textwrap.dedent(f"""
        name: twins
        base: {{config: {REPO / 'configs/default.yaml'}}}
        rows:
          - {{name: base}}
          - {{name: explicit d_k, model.d_k: 16, model.d_v: 16}}
          - {{name: pre, model.norm_position: pre}}
    """))
    out = ablate_here("sweep", "s.yaml", "--dry-run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "explicit d_k: 0.235M params; SAME MODEL AND TRAINING AS 'base'" in out.stdout
    assert "pre: 0.235M params (+0.11%); encoder.layers.*.res_attn: PostNorm -> PreNorm" in out.stdout
