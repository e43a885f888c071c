"""The registry: registration, lookup errors, parameters, user modules and entry points."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from torch import nn

import ablate
from ablate import registry
from ablate.registry import variants
from ablate.errors import ConfigError


def test_every_kind_has_components():
    for kind in registry.kinds():
        assert registry.names(kind), kind


def test_unknown_name_lists_names_and_closest_match():
    with pytest.raises(ConfigError) as err:
        registry.get("positional", "sinusodal", key="model.positional")
    msg = str(err.value)
    assert "model.positional='sinusodal'" in msg
    assert "learned" in msg and "none" in msg and "did you mean 'sinusoidal'" in msg


def test_registering_a_name_twice_is_an_error():
    with pytest.raises(registry.RegistrationError, match="already registered"):
        registry.register("positional", "sinusoidal")(object)


def test_unknown_kind_is_an_error():
    with pytest.raises(registry.RegistrationError, match="unknown component kind"):
        registry.register("nope", "x")(object)


def test_a_summary_wrapped_over_lines_describes_a_variant_on_one_line():
    def wrapped():
        """Queries scaled by a learned temperature per head, a summary long enough to wrap
        (Someone et al. 2020).

        Details that ``ablate components`` does not print."""

    def undocumented():
        pass

    assert variants.summary(wrapped) == ("Queries scaled by a learned temperature per head, a summary long enough "
                                         "to wrap (Someone et al. 2020).")
    assert variants.summary(undocumented) == ""
    mla = next(e for e in registry.entries("attention") if e.name == "mla")
    assert mla.description.endswith("per position (DeepSeek-AI 2024, DeepSeek-V2).")  # its docstring wraps there


def test_params_split_context_from_user_arguments():
    entry = registry.get("positional", "learned")
    assert entry.context == {"d_model"}
    assert [p.name for p in entry.params] == ["max_len"]
    assert entry.params[0].default == 1024 and entry.params[0].annotation is int


def test_check_args_rejects_unknown_and_mistyped():
    with pytest.raises(ConfigError, match=r"model.mask_args.widow.*parameter of mask 'sliding_window' \(window\)"):
        registry.check_args("mask", "sliding_window", {"widow": 3}, key="model.mask_args")
    with pytest.raises(ConfigError, match="expected a int"):
        registry.check_args("mask", "sliding_window", {"window": "big"}, key="model.mask_args")


def test_user_module_registers_a_variant(tmp_path, monkeypatch):
    (tmp_path / "my_positional_mod.py").write_text(
        textwrap.dedent(
            '''
            import torch
            from ablate import register
            from ablate.components.positional import Positional

            @register("positional", "test_constant")
            class ConstantPositional(Positional):
                """Adds a constant to every position."""
                def __init__(self, *, d_model: int, value: float = 1.0):
                    super().__init__()
                    self.value = value
                def forward(self, x, offset=0):
                    return x + self.value
            '''
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    cfg = ablate.load_config(None, ["model.positional=test_constant", "model.positional_args.value=2.5"],
                             imports=["my_positional_mod"])
    try:
        model = ablate.build_model(cfg)
        assert model.src_input.positional.value == 2.5
        assert "test_constant" in registry.names("positional")
    finally:
        registry.unregister("positional", "test_constant")
    assert "test_constant" not in registry.names("positional")


def test_missing_import_is_a_config_error():
    with pytest.raises(ConfigError, match="imports='no_such_module_xyz'"):
        ablate.load_config(None, [], imports=["no_such_module_xyz"])


def test_entry_points_are_loaded(monkeypatch):
    loaded = []

    class FakeEntryPoint:
        def load(self):
            loaded.append(True)

    monkeypatch.setattr(registry.plugins, "_entry_points_loaded", False)
    monkeypatch.setattr(registry.plugins, "entry_points",
                        lambda group: [FakeEntryPoint()] if group == "ablate.components" else [])
    registry.load_plugins()
    assert loaded == [True]


def test_a_plain_module_registered_as_a_positional_is_refused_at_import():
    class ZerosPE(nn.Module):
        def forward(self, x, offset=0):
            return x * 0

    pattern = (r"cannot register positional 'zeros': .*ZerosPE does not implement .*Positional "
               r"\(missing: .*rotate.*score_bias")
    with pytest.raises(registry.RegistrationError, match=pattern):
        registry.register("positional", "zeros")(ZerosPE)
    assert "zeros" not in registry.names("positional")


def test_a_function_factory_is_checked_by_its_return_annotation_and_by_what_it_builds():
    def returns_module() -> nn.Linear:  # an nn.Module but no Residual
        return nn.Linear(2, 2)

    with pytest.raises(registry.RegistrationError, match="norm_position 'linear'.*Residual"):
        registry.register("norm_position", "linear")(returns_module)

    def unannotated(*, dropout):
        return nn.Identity()

    registry.register("norm_position", "test_unannotated")(unannotated)  # nothing to check yet
    try:
        with pytest.raises(TypeError, match="built a Identity, not a Residual"):
            registry.create("norm_position", "test_unannotated", {"dropout": 0.0})
    finally:
        registry.unregister("norm_position", "test_unannotated")


def test_unregistering_what_is_not_registered_is_refused():
    with pytest.raises(registry.RegistrationError, match="cannot unregister mask 'no_such_mask'"):
        registry.unregister("mask", "no_such_mask")


USER_MODULE = '''
"""A user's own kind (activation), an FFN that takes one, an attention variant and a score-bias positional."""
import torch
from torch import nn

from ablate import declare_kind, register
from ablate.components.attention import Attention
from ablate.components.positional import Positional

declare_kind("activation", key="model.activation", interface=nn.Module, default="relu",
             description="the nonlinearity of the user's FFN")


@register("activation", "relu")
class ReLU(nn.ReLU):
    """max(0, x)."""


@register("activation", "relu2")
class SquaredReLU(nn.Module):
    """relu(x)^2 (So et al. 2021, Primer)."""
    def forward(self, x):
        return torch.relu(x) ** 2


@register("ffn", "mlp")
class MLP(nn.Module):
    """A two-layer FFN whose nonlinearity is the configured activation."""
    def __init__(self, *, d_model: int, d_ff: int, activation: nn.Module):
        super().__init__()
        self.up, self.down, self.act = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), activation
    def forward(self, x):
        return self.down(self.act(self.up(x)))


@register("attention", "temperature")
class LearnedTemperature(Attention):
    """Each head's queries scaled by a learned temperature, initialised to `init`."""
    def __init__(self, *, init: float = 1.0, **dims):
        super().__init__(**dims)
        self.log_t = nn.Parameter(torch.full((self.n_heads, 1, 1), float(init)).log())
    def normalize_q(self, q):
        return q * self.log_t.exp()


@register("positional", "learned_alibi")
class LearnedALiBi(Positional):
    """ALiBi with one learned slope per head."""
    def __init__(self, *, n_heads: int):
        super().__init__()
        self.slope = nn.Parameter(torch.full((n_heads,), 0.1))
    def score_bias(self, t_q, t_k):
        i = torch.arange(t_k - t_q, t_k)[:, None]
        j = torch.arange(t_k)[None, :]
        return -self.slope[:, None, None] * (i - j).abs()
'''


def test_a_user_kind_and_user_variants_are_listed_built_and_trained(tmp_path):
    import json
    import subprocess

    (tmp_path / "user_parts.py").write_text(USER_MODULE)
    (tmp_path / "configs").symlink_to(Path(__file__).resolve().parents[1] / "configs")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ablate.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    listed = run("components", "--import", "user_parts")
    assert listed.returncode == 0, listed.stderr
    for text in ("activation: the nonlinearity", "relu2", "mlp", "temperature", "init: float = 1.0", "learned_alibi"):
        assert text in listed.stdout, text
    overrides = ["logger=none", "model.ffn=mlp", "model.activation=relu2", "model.attention=temperature",
                 "model.positional=learned_alibi", "model.n_layers=1", "model.d_model=32",
                 "data.task_args={n_train: 64}", "train.max_steps=4", "train.val_every=2",
                 "trainer.enable_progress_bar=false", "output_dir=run"]
    trained = run("train", "--import", "user_parts", *overrides)
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "finished"
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "activation: relu2" in config and "attention: temperature" in config
    described = run("describe", "--import", "user_parts", "--json", "configs/default.yaml", *overrides[1:6])
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["config"]["model"]["activation"] == "relu2"
