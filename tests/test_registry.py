"""The registry: registration, lookup errors, parameters, user modules and entry points."""

from __future__ import annotations

import sys
import textwrap

import pytest

import ablate
from ablate import registry
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
    model = ablate.build_model(cfg)
    assert model.src_input.positional.value == 2.5
    assert "test_constant" in registry.names("positional")


def test_missing_import_is_a_config_error():
    with pytest.raises(ConfigError, match="imports='no_such_module_xyz'"):
        ablate.load_config(None, [], imports=["no_such_module_xyz"])


def test_entry_points_are_loaded(monkeypatch):
    loaded = []

    class FakeEntryPoint:
        def load(self):
            loaded.append(True)

    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "entry_points", lambda group: [FakeEntryPoint()] if group == "ablate.components" else [])
    registry.load_plugins()
    assert loaded == [True]
