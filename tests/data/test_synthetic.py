"""The synthetic seq2seq tasks draw every string's symbols in one call: the same examples, bit for bit, as one draw
per string (the data every run before this change trained on)."""

from __future__ import annotations

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from ablate import registry
from ablate.config.schema import run_schema
from tests.conftest import REPO


def one_draw_per_string(data: DictConfig, n: int, seed: int, min_len: int, transform) -> list[tuple[list, list]]:
    """The examples as they were drawn before: the lengths, then one ``torch.randint`` per string."""
    first = max(data.pad_id, data.bos_id, data.eos_id) + 1
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, data.max_len + 1, (n,), generator=g)
    examples = []
    for length in lengths:
        src = torch.randint(first, data.vocab_size, (int(length),), generator=g).tolist()
        examples.append((src, transform(src)))
    return examples


@pytest.mark.parametrize(("task", "transform"), [("reverse", lambda s: s[::-1]), ("copy", list), ("sort", sorted)])
@pytest.mark.parametrize(("vocab_size", "max_len", "min_len", "seed"), [(24, 16, 4, 0), (9, 5, 3, 7), (1000, 40, 1, 3)])
def test_every_example_is_the_one_a_draw_per_string_gave(task, transform, vocab_size, max_len, min_len, seed):
    data = OmegaConf.merge(run_schema().data, {"task": task, "vocab_size": vocab_size, "max_len": max_len})
    module = registry.create("task", task, {"data": data, "seed": seed},
                             {"min_len": min_len, "n_train": 3000, "n_val": 200})
    module.setup("fit")
    assert module.train_set == one_draw_per_string(data, 3000, seed, min_len, transform)
    assert module.val_set == one_draw_per_string(data, 200, seed + 1_000_003, min_len, transform)


def test_the_quickstart_trains_on_the_data_it_trained_on_before():
    """configs/default.yaml's task as the quickstart's runs build it (20,000 strings), seeds 0 and 9."""
    import ablate
    from ablate.data import build_task

    for seed in (0, 9):
        cfg = ablate.load_config(REPO / "configs/default.yaml", [f"seed={seed}", "logger=none"])
        module = build_task(cfg)
        module.setup("fit")
        args = cfg.data.task_args
        assert len(module.train_set) == args.n_train
        assert module.train_set == one_draw_per_string(cfg.data, args.n_train, seed, args.min_len, lambda s: s[::-1])
