"""Decoding (section 6.1): greedy and beam search over the model's key/value cache, batched translation,
and sampling from a language model."""

from ablate.decode.batch import translate
from ablate.decode.sample import sample
from ablate.decode.search import beam_search, greedy, length_penalty
from ablate.decode.steps import CachedSteps, RecomputeSteps

__all__ = ["CachedSteps", "RecomputeSteps", "beam_search", "greedy", "length_penalty", "sample", "translate"]
