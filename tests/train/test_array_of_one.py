"""A seed array of one member is its solo run: the same result, the same validation history and the same weights in
``last.ckpt`` and ``best.ckpt``, to fp32 tolerance (dropout off: an array draws its members' masks together).

What a run's life does (validated, checkpointed, its best kept, recorded) is written once for both
(:mod:`ablate.train.life`); this is the check that the fused path a GPU user takes by default adds nothing and loses
nothing.
"""

from __future__ import annotations

import json

import torch

from ablate.config import load_config
from ablate.train.array import train_array
from ablate.train.run import train
from tests.conftest import REPO, TINY, assert_same_values, result_of

ARGS = [*TINY, "trainer.enable_progress_bar=false", "trainer.precision=32-true", "trainer.threads=1",
        "model.dropout=0.0", "model.attention_dropout=0.0", "train.max_steps=30", "train.val_every=10",
        "train.log_every=5", "train.keep_checkpoints=2", "train.checkpoint_every=10", "seed=3"]
# what two processes that train the same run record differently: when, where, how fast, and the array's own record
ASIDE = {"run_dir", "started_at", "wall_time_s", "tokens_per_s", "threads", "fused", "config_hash"}


def _weights(path) -> tuple[dict[str, torch.Tensor], int]:
    """A checkpoint's model weights, each key projection's bias zeroed, and its step.

    The key bias has no gradient but rounding's: it adds q·b_k to every score of a query, which the softmax takes
    away. Adam scales that noise to full-size steps (m / sqrt(v)), so two processes whose sums round differently move
    it apart, with no effect on any output (the results and histories above agree to 1e-5): it is left out."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    weights = {k: v.clone() for k, v in checkpoint["state_dict"].items() if k.startswith("model.")}
    for key, value in weights.items():
        if key.endswith(".w_qkv.bias"):  # (3 h d_k,): q, k, v
            value[value.numel() // 3: 2 * value.numel() // 3] = 0
        elif key.endswith(".w_kv.bias"):  # (2 h d_k,): k, v (cross-attention)
            value[: value.numel() // 2] = 0
    return weights, checkpoint["global_step"]


def test_an_array_of_one_member_trains_and_records_what_the_solo_run_does(tmp_path):
    solo = train(load_config(REPO / "configs/default.yaml", [*ARGS, f"output_dir={tmp_path / 'solo'}"]))
    (member,) = train_array([load_config(REPO / "configs/default.yaml", [*ARGS, f"output_dir={tmp_path / 'one'}"])])
    a, b = result_of(solo), result_of(member)
    assert b["fused"]["members"] == 1 and a["status"] == "finished" and a["step"] == 30
    assert set(a) | {"fused"} == set(b), sorted(set(a) ^ set(b))
    final = {k for k in a["final"] if not k.endswith("tokens_per_s")}
    assert_same_values({k: v for k, v in a.items() if k not in ASIDE | {"final"}},
                       {k: v for k, v in b.items() if k not in ASIDE | {"final"}}, "result")
    assert_same_values({k: a["final"][k] for k in final}, {k: b["final"][k] for k in final}, "result.final")
    assert_same_values(*(json.loads((d / "progress.json").read_text()) for d in (solo, member)), "progress.json")
    for name in ("last.ckpt", "best.ckpt", "step-20.ckpt", "step-30.ckpt"):
        (wa, step_a), (wb, step_b) = _weights(solo / "checkpoints" / name), _weights(member / "checkpoints" / name)
        assert step_a == step_b and wa.keys() == wb.keys(), name
        for key in wa:
            torch.testing.assert_close(wa[key], wb[key], rtol=1e-4, atol=1e-5, msg=f"{name}: {key}")
    assert sorted(p.name for p in (solo / "checkpoints").iterdir()) == \
        sorted(p.name for p in (member / "checkpoints").iterdir())
