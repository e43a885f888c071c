"""Which attention kernel a run trains with (``trainer.attention_kernel``, :mod:`ablate.train.kernels`): flex where it
can serve the model on the device, else SDPA with one line saying why; cuDNN's attention kept out of SDPA on CUDA
(pytorch#196678); the setting's place in the run's identity and in seed arrays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import ablate
from ablate.components import flex
from ablate.model.transformer import boolean_form
from ablate.runs.files import config_hash
from ablate.train import kernels, run
from tests.conftest import REPO, TINY, ablate_here

CUDA, CPU = torch.device("cuda"), torch.device("cpu")
CPU_LINE = f"trainer.attention_kernel=flex: training with SDPA instead (torch {torch.__version__.split('+')[0]} has " \
           "no FlexAttention backward on the cpu)"


def _model(*overrides: str) -> torch.nn.Module:
    return ablate.build_model(ablate.load_config(None, TINY + list(overrides)))


def test_sdpa_leaves_the_boolean_masks():
    model = _model()
    assert kernels.choose_attention_kernel(model, "sdpa", CUDA) == ("sdpa", None)
    assert model.mask_form is boolean_form


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_flex_sets_block_masks_where_it_can_serve_the_model(arch):
    """The decision alone (no GPU needed): the paper's model on a CUDA device."""
    model = _model(f"model.arch={arch}")
    assert kernels.choose_attention_kernel(model, "flex", CUDA) == ("flex", None)
    assert model.mask_form is flex.block_mask


@pytest.mark.parametrize("overrides,reason", [
    (["model.attention_dropout=0.1"], "decoder.layers.0.self_attn: attention dropout 0.1 (flex applies none)"),
    (["model.positional=alibi"], "decoder.layers.0.self_attn: ALiBi adds a bias to the attention scores"),
    (["model.positional=relative"], "adds a bias to the attention scores"),
    (["model.attention=synthesizer_dense"], "DenseSynthesizer computes its attention its own way (self_heads)"),
    (["model.attention=talking_heads"], "TalkingHeadsAttention computes its attention its own way (attend)"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_model_flex_cannot_serve_trains_with_sdpa_and_says_why(overrides, reason):
    model = _model("model.arch=decoder_only", *overrides)
    kernel, line = kernels.choose_attention_kernel(model, "flex", CUDA)
    assert kernel == "sdpa" and line.startswith("trainer.attention_kernel=flex: training with SDPA instead (")
    assert reason in line and "\n" not in line
    assert model.mask_form is boolean_form


def test_flex_off_cuda_trains_with_sdpa_and_says_why():
    model = _model()
    assert kernels.choose_attention_kernel(model, "flex", CPU) == ("sdpa", CPU_LINE)
    assert model.mask_form is boolean_form


def test_cudnn_attention_is_turned_off_on_cuda_only(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", calls.append)
    assert kernels.pin_attention_backends(CPU) is False and calls == []
    assert kernels.pin_attention_backends(CUDA) is True and calls == [False]


def test_ablate_train_chooses_the_kernel_pins_and_says_why_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "configs").symlink_to(REPO / "configs")
    pinned, turned_off = [], []
    monkeypatch.setattr(run, "pin_attention_backends", lambda device: pinned.append(device.type))
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", turned_off.append)
    out = ablate_here("train", *TINY, "train.max_steps=2", "train.val_every=2", "trainer.enable_progress_bar=false",
                      "trainer.attention_kernel=flex", "output_dir=run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.splitlines().count(CPU_LINE) == 1
    assert pinned == ["cpu"] and turned_off == []
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "finished" and result["attention_kernel"] == "sdpa"


def test_sdpa_is_no_identity_and_flex_is():
    """Hashes from before the key stay (sdpa, its default, is left out); flex is another run, as compile is."""
    cfg = ablate.load_config(REPO / "configs/default.yaml")
    before = OmegaConf.to_container(cfg)
    del before["trainer"]["attention_kernel"]
    assert config_hash(OmegaConf.create(before)) == config_hash(cfg)
    assert config_hash(ablate.load_config(REPO / "configs/default.yaml", ["trainer.attention_kernel=flex"])) \
        != config_hash(cfg)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_flex_run_on_cuda_trains_with_flex_and_cudnn_attention_off(tmp_path: Path):
    cfg = ablate.load_config(None, TINY + ["trainer.accelerator=gpu", "trainer.devices=1", "train.max_steps=6",
                                           "train.val_every=3", "trainer.enable_progress_bar=false",
                                           "trainer.attention_kernel=flex", f"output_dir={tmp_path / 'run'}"])
    result = json.loads((run.train(cfg) / "result.json").read_text())
    assert result["status"] == "finished" and result["attention_kernel"] == "flex"
    assert torch.isfinite(torch.tensor(result["final"]["train/loss"]))
    assert not torch.backends.cuda.cudnn_sdp_enabled()
