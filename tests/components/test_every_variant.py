"""Generated from the registry: every registered variant of every declared kind is tested here.

A variant registered tomorrow, or a kind declared tomorrow, is tested without a new line of test code
(:mod:`tests.variants` lists them from the registry).
"""

from __future__ import annotations

import math

import pytest
import torch

import ablate
from ablate import registry
from ablate.config.schema import run_schema
from tests.conftest import TINY, refusal, skip_if_refused
from tests.variants import ARCHS, VARIANT_IDS, VARIANTS, batch, run

CHANGED = [(kind, name) for kind, name in VARIANTS if name != registry.kind(kind).default]
REFUSED = {("sharing", "encoder", "decoder_only")}  # a decoder-only model has no encoder to share
LONG = 80  # longer than every default window and prefix, so that each mask variant changes something


def test_every_kind_has_its_default_registered_and_a_schema_key():
    schema = run_schema()
    for kind in registry.kinds().values():
        assert kind.default in registry.names(kind.name), kind.name
        assert schema[kind.section][kind.field] == kind.default
        assert dict(schema[kind.section][f"{kind.field}_args"]) == {}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind,name", VARIANTS, ids=VARIANT_IDS)
def test_a_variant_builds_for_every_architecture_or_refuses_it_by_name(kind, name, arch):
    """A variant that cannot serve an architecture (sharing=encoder in a decoder-only model) refuses it in one line
    naming its key and the architecture (:func:`refusal`, which raises any other error); only the listed ones do."""
    e = refusal(kind, name, arch)
    if e is None:
        assert (kind, name, arch) not in REFUSED, f"{kind}={name} builds for {arch}"
    else:
        assert "\n" not in str(e), e
        assert (kind, name, arch) in REFUSED, f"{kind}={name} refuses {arch}: add it to REFUSED if that is meant"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind,name", VARIANTS, ids=VARIANT_IDS)
def test_variant_forward_backward(kind, name, arch):
    skip_if_refused(kind, name, arch)
    cfg = ablate.load_config(None, TINY + [f"model.{kind}={name}", f"model.arch={arch}"])
    model = ablate.build_model(cfg)
    b = batch(cfg.data.vocab_size, cfg.data.pad_id)
    logits = run(model, arch, b)
    assert logits.shape == (3, 5, cfg.data.vocab_size)
    assert torch.isfinite(logits).all()
    logits.logsumexp(-1).mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("kind,name", CHANGED, ids=[f"{k}={n}" for k, n in CHANGED])
def test_every_variant_builds_a_model_that_differs_from_the_default(kind, name):
    """Either the weights differ in number, shape or sharing, or, with every weight copied over, the function does.

    A builder that ignored ``model.<kind>`` would fail here for every variant of that kind.
    """
    common = TINY + ["model.dropout=0.0", f"data.max_len={LONG}"]
    default = ablate.build_model(ablate.load_config(None, common)).eval()
    variant = ablate.build_model(ablate.load_config(None, common + [f"model.{kind}={name}"])).eval()
    a, b = default.state_dict(), variant.state_dict()
    distinct = [sorted(tuple(p.shape) for p in m.parameters()) for m in (default, variant)]  # shared ones once
    if distinct[0] != distinct[1] or {k: v.shape for k, v in a.items()} != {k: v.shape for k, v in b.items()}:
        return  # a different layout of weights: a different model
    variant.load_state_dict(a)
    long = batch(24, 0, length=LONG)
    with torch.no_grad():
        assert not torch.allclose(run(default, "encoder_decoder", long), run(variant, "encoder_decoder", long))


@pytest.mark.parametrize("kind,name", VARIANTS, ids=VARIANT_IDS)
def test_built_parts_implement_their_kind(kind, name):
    cfg = ablate.load_config(None, TINY + [f"model.{kind}={name}"])
    from ablate.model.builder import Parts

    extra = {"stack": "decoder", "positional": None} if kind == "attention" else {"stack": "decoder"}
    assert isinstance(Parts(cfg).make(kind, **extra), registry.kind(kind).interface)


@pytest.mark.parametrize("name", registry.names("schedule"))
def test_schedule_gives_positive_finite_lr(name):
    context = {"d_model": 64, "lr": 1e-3, "max_steps": 1000}
    schedule = registry.create("schedule", name, context, {"warmup": 10})
    lrs = [schedule(step) for step in range(0, 1000, 7)]
    assert all(lr > 0 and math.isfinite(lr) for lr in lrs), name


@pytest.mark.parametrize("name", [n for n in registry.names("schedule") if n != registry.kind("schedule").default])
def test_every_schedule_differs_from_the_default(name):
    context = {"d_model": 64, "lr": 1e-3, "max_steps": 1000}
    default = registry.create("schedule", registry.kind("schedule").default, context, {})
    other = registry.create("schedule", name, context, {})
    assert [default(s) for s in range(0, 1000, 50)] != [other(s) for s in range(0, 1000, 50)]


@pytest.mark.parametrize("kind", list(registry.kinds()))
def test_every_variant_cites_where_it_comes_from_or_says_what_it_is(kind):
    for entry in registry.entries(kind):
        assert len(entry.description) > 15, (kind, entry.name)
