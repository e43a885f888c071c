"""The optimiser: the paper's Adam, fused where PyTorch and Lightning allow it, the same update either way."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

import ablate
from ablate.train.optimizer import adam
from ablate.train.run import train
from tests.conftest import TINY


def _train_cfg(**kw):
    return OmegaConf.create({"betas": [0.9, 0.98], "eps": 1e-9, "weight_decay": 0.0, "grad_clip": None, **kw})


def test_fused_on_cpu_with_the_papers_hyperparameters():
    opt = adam(torch.nn.Linear(4, 4).parameters(), _train_cfg())
    group = opt.param_groups[0]
    assert group["fused"] and group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9


def test_not_fused_when_lightning_would_refuse_to_clip_it():
    params = list(torch.nn.Linear(4, 4).parameters())
    assert not adam(params, _train_cfg(grad_clip=1.0), mixed_precision=True).param_groups[0]["fused"]
    assert adam(params, _train_cfg(grad_clip=1.0)).param_groups[0]["fused"]
    assert adam(params, _train_cfg(), mixed_precision=True).param_groups[0]["fused"]


def test_fused_and_unfused_take_the_same_steps():
    torch.manual_seed(0)
    a = torch.nn.Linear(8, 8)
    b = torch.nn.Linear(8, 8)
    b.load_state_dict(a.state_dict())
    opts = [adam(a.parameters(), _train_cfg(), lr=1e-2),
            torch.optim.Adam(b.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9)]
    assert opts[0].param_groups[0]["fused"] and not opts[1].param_groups[0]["fused"]
    for _ in range(5):
        x = torch.randn(16, 8)
        for model, opt in zip((a, b), opts):
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_mixed_precision_with_gradient_clipping_trains(in_tmp):
    cfg = ablate.load_config(None, TINY + ["train.max_steps=2", "train.val_every=2",
                                           "trainer.enable_progress_bar=false", "trainer.precision=bf16-mixed",
                                           "train.grad_clip=1.0", "output_dir=run"])
    run_dir = train(cfg)
    assert json.loads((run_dir / "result.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("device", ["meta"])
def test_parameters_on_another_device_get_the_default_adam(device):
    params = list(torch.nn.Linear(4, 4, device=device).parameters())
    assert not adam(params, _train_cfg()).param_groups[0]["fused"]
