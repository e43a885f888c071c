"""sample(): greedy at temperature 0, top-k, seeded repeatability, the context window, bad arguments."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ablate.decode import sample

V = 10


class Counter(nn.Module):
    """Next token = (last token + 1) mod V, strongly; records the length of every input it sees."""

    def __init__(self, margin: float = 5.0):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # gives the module a device
        self.margin, self.seen = margin, []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, V)
        self.seen.append(ids.size(1))
        return nn.functional.one_hot((ids + 1) % V, V).float() * self.margin


def test_temperature_zero_and_top_1_take_the_likeliest_token():
    assert sample(Counter(), [3], max_new_tokens=5, context=8, temperature=0) == [4, 5, 6, 7, 8]
    g = torch.Generator().manual_seed(0)
    assert sample(Counter(margin=0.1), [3], max_new_tokens=5, context=8, top_k=1, generator=g) == [4, 5, 6, 7, 8]


def test_samples_are_seeded_and_temperature_spreads_them():
    def draw(seed: int, temperature: float) -> list[int]:
        g = torch.Generator().manual_seed(seed)
        return sample(Counter(margin=1.0), [0], max_new_tokens=200, context=4, temperature=temperature, generator=g)

    assert draw(1, 1.0) == draw(1, 1.0)
    assert draw(1, 1.0) != draw(2, 1.0)

    def off_path(tokens: list[int]) -> int:  # steps that did not follow the +1 rule
        previous = [0, *tokens[:-1]]
        return sum(t != (p + 1) % V for p, t in zip(previous, tokens))

    # margin 1, V 10: p(+1) = e / (e + 9) = 0.23 at temperature 1; at 0.2 it is e^5 / (e^5 + 9) = 0.94
    assert off_path(draw(0, 0.2)) < 40 < off_path(draw(0, 1.0))


def test_top_k_never_leaves_the_k_likeliest():
    class Ranked(Counter):
        def forward(self, ids):
            return torch.arange(V, dtype=torch.float).expand(*ids.shape, V)  # token 9 likeliest, then 8, ...

    g = torch.Generator().manual_seed(0)
    assert set(sample(Ranked(), [0], max_new_tokens=300, context=4, top_k=3, generator=g)) == {7, 8, 9}


def test_each_step_sees_at_most_the_context():
    model = Counter()
    sample(model, [1, 2, 3], max_new_tokens=6, context=4, temperature=0)
    assert model.seen == [3, 4, 4, 4, 4, 4]


@pytest.mark.parametrize("kwargs", [{"prompt": []}, {"temperature": -1.0}, {"top_k": 0}, {"context": 0}])
def test_bad_arguments_are_refused(kwargs):
    args = {"prompt": [1], "max_new_tokens": 2, "context": 4, **kwargs}
    with pytest.raises(ValueError):
        sample(Counter(), args.pop("prompt"), **args)
