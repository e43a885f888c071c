"""The metrics a run logs, by name: what a sweep's ``metric`` may name and a report may show.

Training logs ``LOGGED`` (Lightning's CSV and W&B loggers, ``result.json``'s final and best); ``ablate evaluate``
adds ``test/bleu`` and a language model's loss and perplexity at multiples of its training length (``EVALUATED``);
a model whose components add auxiliary losses logs ``train/aux/<name>`` and ``val/aux/<name>`` (``AUXILIARY``).
``tests/train/test_train.py`` checks that a run logs nothing outside this list.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from ablate.stats.design import DEFAULT_GOAL

VAL_LOSS = "val/loss"  # mean NLL per scored token of the validation split (not label-smoothed)
VAL_PPL = "val/ppl"  # exp(val/loss)
VAL_ACC = "val/acc"  # next-token accuracy over the scored tokens
VAL_BLEU = "val/bleu"  # translation tasks: the validation split decoded greedily
TEST_BLEU = "test/bleu"  # translation tasks, after training: ablate evaluate
TRAIN_LOSS = "train/loss"  # the training objective (label-smoothed), mean over the steps since the last log
LR = "train/lr"  # the learning rate of each step (Lightning's LearningRateMonitor, under the scheduler's name)
TOKENS_PER_S = "train/tokens_per_s"  # target tokens per second over the last train.log_every steps
LOGGED = (VAL_LOSS, VAL_PPL, VAL_ACC, VAL_BLEU, TRAIN_LOSS, TOKENS_PER_S, LR)
DEFAULT_METRIC = VAL_LOSS  # a sweep's metric when its file names none; its goal: DEFAULT_GOAL (minimize)
# Curves: their last value is no result of the run (result.json's final leaves them out). A run's throughput is
# result.json's tokens_per_s: every target token over every second of training (validation excluded), all attempts.
CURVES = (LR, TOKENS_PER_S)
EPOCH = "epoch"  # the epoch a logged row is in: Lightning adds it to every row a LightningModule logs
EVALUATED = re.compile(r"^(test/bleu|val/(loss|ppl)@\d+x)$")
AUXILIARY = re.compile(r"^(train|val)/aux/[A-Za-z0-9_]+$")  # a component's auxiliary loss (ablate.components.auxiliary)


def steps_done(logged: int) -> int:
    """The step a value belongs to, as every ablate record counts it (result.json's ``step``, W&B's ``step``,
    metrics.csv's ``step``, the report's curves): optimiser steps done, 1 for the first step. Lightning passes its
    loggers the 0-based index of the last step trained (the validation after 30 steps comes as 29)."""
    return logged + 1


def known(name: str) -> bool:
    """Whether some run logs ``name`` (in training, or ablate evaluate; a component's auxiliary loss)."""
    return name in LOGGED or bool(EVALUATED.match(name) or AUXILIARY.match(name))


def allowed(name: str) -> str:
    """What a metric name may be, in words, with the closest known name when there is one."""
    close = difflib.get_close_matches(name, [*LOGGED, TEST_BLEU, f"{VAL_LOSS}@2x"], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"a metric runs log: {', '.join(LOGGED)}; test/bleu or val/loss@Nx after ablate evaluate{hint}"


def default_metric() -> dict[str, Any]:
    """A sweep's metric when its file names none: ``{name: val/loss, goal: minimize}`` (a new dict each call)."""
    return {"name": DEFAULT_METRIC, "goal": DEFAULT_GOAL}


def perplexity(loss: float) -> float:
    """exp(loss): the perplexity of a loss in nats, infinite past the largest float (a diverged loss above ~709 nats
    is a result, not an error)."""
    return math.exp(loss) if loss < 709.0 else math.inf
