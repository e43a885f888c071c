"""Which variants fuse (issue 26), generated from the registry, and why a run config's seeds cannot train as one.

Every variant of every kind that builds part of the model (:data:`tests.variants.VARIANTS`) either trains its seeds
as one fused model (:class:`ablate.train.fused.FusedModel`) with every member equal to its solo model, its logits and
the gradients of its loss, within 1e-5 relative; or it declares ``not_fusable`` in one line, and then fusing it
really fails or differs, so that a stale declaration is caught. A variant registered tomorrow is checked by the same
:func:`check_variant` (the user's variants below). ``train.schedule`` and ``data.task`` build no part of the model: a
schedule is a function of the step, the same for every member, and a task gives each member its own batches
(:mod:`ablate.data.members`); a declaration of theirs is still read by :func:`why_not_fused`, tested at the end.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ablate
from ablate import registry
from ablate.components.auxiliary import collect_aux_losses, weighted_total
from ablate.components.feedforward import FeedForward
from ablate.components.positional import LEARNED_BIAS_NOT_FUSABLE
from ablate.train.fused import FusedModel
from ablate.train.fusable import why_not_fused
from tests.conftest import REPO, TINY, refusal
from tests.variants import ARCHS, MODEL_KINDS, VARIANT_IDS, VARIANTS, batch, inputs

# On CPU, torch has no vmap batching rule for its flash-attention kernel and loops over the members: slower, the same.
pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop because we have not yet implemented")

FUSE = TINY + ["model.dropout=0.0", "model.attention_dropout=0.0"]  # d_model 32, fp32 (torch's default dtype)
SEEDS = (0, 1)  # one member each
TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def objective(model, member_inputs: dict[str, torch.Tensor], labels: torch.Tensor, pad: int):
    """A member's training loss (cross-entropy over its real tokens plus its weighted auxiliary losses) and its
    logits (B, T, V)."""
    with collect_aux_losses() as aux:
        logits = model(**member_inputs)  # (B, T, V)
    ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad)
    return ce + weighted_total(aux), logits


def member_batches(cfg, arch: str) -> list[tuple[dict[str, torch.Tensor], torch.Tensor]]:
    """Each member's own batch: the model's inputs and its labels (B, T), the next tokens of its targets."""
    out = []
    for seed in SEEDS:
        b = batch(cfg.data.vocab_size, cfg.data.pad_id, length=6, seed=100 + seed)
        out.append((inputs(arch, b), b["tgt"].roll(-1, dims=1)))
    return out


def solo_members(cfg) -> list[nn.Module]:
    """Each member's solo model, built after seeding with its own seed (as its solo run builds it)."""
    models = []
    for seed in SEEDS:
        torch.manual_seed(seed)
        models.append(ablate.build_model(cfg))
    return models


def assert_members_hold_their_solo_state(fused: FusedModel, solos: list[nn.Module]) -> None:
    """What a member's checkpoint holds is its solo model's ``state_dict``, every key of tied weights too."""
    for k, model in enumerate(solos):
        want, got = model.state_dict(), fused.member_state_dict(k)
        assert list(got) == list(want), f"member {k}'s state_dict keys differ"
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=lambda m: f"member {k} {key}: {m}")


def fusion_failure(cfg, arch: str) -> str | None:
    """How the fused members differ from their solo models, or what fusing them raised; None: each member's logits
    and gradients equal its solo model's within :data:`TOLERANCE`."""
    pad, data, solos = cfg.data.pad_id, member_batches(cfg, arch), solo_members(cfg)
    fused = FusedModel(solos)  # stacks copies: the solo models' own gradients stay theirs
    assert_members_hold_their_solo_state(fused, solos)
    solo_logits = []
    for model, (member_inputs, labels) in zip(solos, data):
        loss, logits = objective(model, member_inputs, labels, pad)
        loss.backward()
        solo_logits.append(logits.detach())
    try:
        stacked = {key: torch.stack([d[0][key] for d in data]) for key in data[0][0]}  # (K, B, ...)
        losses, logits = fused.vmap(lambda model, i, y: objective(model, i, y, pad))(
            stacked, torch.stack([y for _, y in data]))  # (K,), (K, B, T, V)
        losses.sum().backward()  # members share no parameter: each gets the gradient of its own loss
        for k, model in enumerate(solos):
            torch.testing.assert_close(logits[k], solo_logits[k], **TOLERANCE, msg=lambda m: f"member {k} logits: {m}")
            grads = {name: p.grad for name, p in model.named_parameters()}
            for name, p in fused.params().items():
                if p.grad is None and grads[name] is None:
                    continue  # a parameter no member's loss reaches
                want = grads[name] if grads[name] is not None else torch.zeros_like(p[k])
                got = p.grad[k] if p.grad is not None else torch.zeros_like(p[k])
                torch.testing.assert_close(got, want, **TOLERANCE, msg=lambda m: f"member {k} grad of {name}: {m}")
    except Exception as e:  # an op vmap cannot batch, .item(), a difference: all say "does not fuse"
        return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return None


def check_variant(kind: str, name: str) -> None:
    """The registry's word on a variant is true: it fuses in every architecture it builds for, or it declares why
    not in one line and fails to fuse in at least one."""
    found = {arch: fusion_failure(ablate.load_config(None, FUSE + [f"model.{kind}={name}", f"model.arch={arch}"]),
                                  arch)
             for arch in ARCHS if refusal(kind, name, arch) is None}
    assert found, f"{kind}={name} builds for no architecture"
    reason = registry.get(kind, name).not_fusable
    if reason is None:
        failed = {arch: why for arch, why in found.items() if why is not None}
        assert not failed, f"{kind}={name} does not fuse: {failed}; fix it, or register it with not_fusable='<why>'"
    else:
        assert reason.strip() and "\n" not in reason, f"{kind}={name}: not_fusable must be one line, got {reason!r}"
        assert any(found.values()), f"{kind}={name} fuses in {sorted(found)}: remove its not_fusable ({reason!r})"


def test_the_kinds_left_out_build_no_part_of_the_model():
    """Only the model section's kinds make modules whose weights a fused model stacks; the others (the schedule, the
    task) are checked by :func:`why_not_fused` alone."""
    for kind in registry.kinds().values():
        assert (kind.name in MODEL_KINDS) == (kind.section == "model"), kind.name
        assert kind.section == "model" or not issubclass(kind.interface, nn.Module), kind.name


@pytest.mark.parametrize("kind,name", VARIANTS, ids=VARIANT_IDS)
def test_every_variant_fuses_with_each_member_its_solo_model_or_says_why_not(kind, name):
    check_variant(kind, name)


@pytest.mark.parametrize("variant", ["model.ffn=relu", "model.ffn=moe"])
def test_a_fused_model_in_eval_mode_runs_its_members_in_eval_mode(variant):
    """Validation runs the members as their solo models in eval mode: no dropout, a router's evaluation capacity."""
    cfg = ablate.load_config(None, TINY + ["model.dropout=0.3", "model.arch=decoder_only", variant])
    solos, data = solo_members(cfg), member_batches(cfg, "decoder_only")
    fused = FusedModel(solos).eval()
    stacked = torch.stack([d[0]["ids"] for d in data])  # (K, B, T)
    with torch.no_grad():
        logits = fused.vmap(lambda model, ids: model(ids=ids))(stacked)  # (K, B, T, V)
        for k, model in enumerate(solos):
            torch.testing.assert_close(logits[k], model.eval()(**data[k][0]), **TOLERANCE)


class HostGated(nn.Module):
    """A ReLU feed-forward that reads its input's mean on the host (``.item()``) to choose its branch."""

    def __init__(self, *, d_model: int, d_ff: int):
        super().__init__()
        self.inner = FeedForward(d_model=d_model, d_ff=d_ff, activation=nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) if x.mean().item() < 1e9 else x  # (B, T, d_model)


class Noisy(HostGated):
    """A ReLU feed-forward whose output gets fresh Gaussian noise at every call: a member's draws are its own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 0.1 * torch.randn_like(x)  # (B, T, d_model)


class Halved(HostGated):
    """A ReLU feed-forward whose output is halved: nothing a fused model cannot do."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * self.inner(x)  # (B, T, d_model)


@contextmanager
def registered(name: str, factory: type, not_fusable: str | None = None) -> Iterator[None]:
    """``factory`` registered as the ffn variant ``name`` for the block, as a user's module registers one."""
    registry.register("ffn", name, not_fusable=not_fusable)(factory)
    try:
        yield
    finally:
        registry.unregister("ffn", name)


def test_a_users_variant_that_fuses_passes_the_same_check():
    with registered("test_halved", Halved):
        check_variant("ffn", "test_halved")
        assert why_not_fused(ablate.load_config(None, ["model.ffn=test_halved"])) is None


def test_a_users_variant_that_reads_the_host_fails_the_check_until_it_says_why():
    with registered("test_host_gated", HostGated):
        with pytest.raises(AssertionError, match="does not fuse: .*RuntimeError.*item"):
            check_variant("ffn", "test_host_gated")
    why = "chooses its branch by a value read on the host (.item())"
    with registered("test_host_gated", HostGated, not_fusable=why):
        check_variant("ffn", "test_host_gated")
        assert why_not_fused(ablate.load_config(None, ["model.ffn=test_host_gated"])) == f"ffn 'test_host_gated': {why}"


def test_a_member_that_differs_from_its_solo_model_fails_the_check():
    """Fused, each member draws its own noise (vmap's randomness="different"), not its solo model's: the logits
    differ, and the check says so."""
    with registered("test_noisy", Noisy):
        failure = fusion_failure(ablate.load_config(None, FUSE + ["model.ffn=test_noisy", "model.arch=decoder_only"]),
                                 "decoder_only")
    assert failure is not None and failure.startswith("AssertionError: ") and "member 0 logits" in failure, failure


def test_a_stale_or_long_declaration_fails_the_check():
    with registered("test_stale", Halved, not_fusable="it was thought to route tokens by data"):
        with pytest.raises(AssertionError, match="remove its not_fusable"):
            check_variant("ffn", "test_stale")
    with registered("test_two_lines", HostGated, not_fusable="reads the host\nwith .item()"):
        with pytest.raises(AssertionError, match="must be one line"):
            check_variant("ffn", "test_two_lines")


def _config(path: str | None, *overrides: str):
    return ablate.load_config(REPO / path if path else None, list(overrides))


def test_the_default_config_fuses():
    assert why_not_fused(_config("configs/default.yaml")) is None


FP16 = "fp16's one loss scaler would be shared by the members"
ONE_DEVICE = "an array trains in one process, on one device"


@pytest.mark.parametrize("overrides,reason", [
    (["trainer.precision=16-mixed"], f"trainer.precision=16-mixed: {FP16}"),
    (["trainer.precision=16-true"], f"trainer.precision=16-true: {FP16}"),
    (["trainer.devices=2"], f"trainer.devices=2: {ONE_DEVICE}"),
    (["trainer.devices=-1"], f"trainer.devices=-1: {ONE_DEVICE}"),
    (["trainer.devices=[0,1]"], f"trainer.devices=[0, 1]: {ONE_DEVICE}"),
    (["trainer.strategy=ddp"], f"trainer.strategy=ddp: {ONE_DEVICE}"),
    (["trainer.compile=true"],
     "trainer.compile=true: a seed array's step is not compiled, so the runs would not be what they say"),
    (["trainer.attention_kernel=flex"],
     "trainer.attention_kernel=flex: a seed array's step runs SDPA, so the runs would not be what they say"),
    (["model.positional=t5_bias", "trainer.precision=16-mixed"], f"positional 't5_bias': {LEARNED_BIAS_NOT_FUSABLE}"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_setting_an_array_cannot_honour_is_the_reason(overrides, reason):
    """A chosen variant's declaration comes before the settings."""
    assert why_not_fused(_config("configs/default.yaml", *overrides)) == reason


@pytest.mark.parametrize("overrides", [["trainer.devices=1"], ["trainer.devices=[0]"], ["trainer.devices=auto"],
                                       ["trainer.strategy=single_device"], ["trainer.precision=bf16-mixed"],
                                       ["trainer.precision=32-true"], ["train.keep_checkpoints=0"],
                                       ["train.keep_checkpoints=5"], ["trainer.attention_kernel=sdpa"]],
                         ids=lambda v: " ".join(v))
def test_settings_one_process_honours_for_each_member_are_no_reason(overrides):
    assert why_not_fused(_config("configs/default.yaml", *overrides)) is None


def test_the_papers_recipe_fuses_with_its_step_checkpoints_and_val_bleu():
    """configs/multi30k.yaml keeps its last 5 step checkpoints and decodes val/bleu (parallel_text reads
    train.val_bleu): an array keeps both for each member (tests/train/test_array_recipe.py)."""
    recipe = _config("configs/multi30k.yaml")
    assert recipe.train.keep_checkpoints == 5 and recipe.train.val_bleu and recipe.data.task == "parallel_text"
    assert why_not_fused(recipe) is None


def test_a_declaration_on_a_kind_outside_the_model_is_read_too():
    """A schedule builds no part of the model, but a user's schedule may still keep a run from fusing."""
    def stepwise(*, lr: float) -> Callable[[int], float]:
        """A constant learning rate that a test declares not fusable."""
        return lambda step: lr

    registry.register("schedule", "test_unfused_schedule", not_fusable="needs the host each step")(stepwise)
    try:
        assert why_not_fused(_config(None, "train.schedule=test_unfused_schedule")) == (
            "schedule 'test_unfused_schedule': needs the host each step")
    finally:
        registry.unregister("schedule", "test_unfused_schedule")
