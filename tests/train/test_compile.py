"""``trainer.compile``: the training forward goes through torch.compile; the numbers and the checkpoint do not
change."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

import ablate
from ablate.train.system import TransformerSystem
from tests.conftest import TINY

pytestmark = pytest.mark.slow  # compiling takes tens of seconds on a CPU


def _system(compile: bool) -> TransformerSystem:
    cfg = ablate.load_config(None, TINY + ["model.dropout=0", f"trainer.compile={str(compile).lower()}"])
    torch.manual_seed(0)
    return TransformerSystem(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def test_compiled_training_forward_gives_the_eager_loss_and_gradients():
    eager, compiled = _system(False), _system(True)
    assert compiled._compiled is not None and eager._compiled is None
    assert compiled.state_dict().keys() == eager.state_dict().keys()  # checkpoints load either way
    g = torch.Generator().manual_seed(0)
    tgt = torch.randint(3, 24, (4, 10), generator=g)
    batch = {"src_ids": torch.randint(3, 24, (4, 9), generator=g), "tgt_ids": tgt, "labels": tgt.roll(-1, 1)}
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    losses = []
    for system in (eager, compiled):
        system.train()
        loss, *_ = system._token_losses(batch, 0.1)
        loss.backward()
        losses.append(loss)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the compiled path really ran
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-5)
    for p, q in zip(compiled.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    compiled.eval()  # validation and decoding stay eager
    torch._dynamo.utils.counters.clear()
    compiled._token_losses(batch, 0.0)
    assert not torch._dynamo.utils.counters["stats"]["unique_graphs"]
