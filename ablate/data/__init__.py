"""Data: registered tasks (synthetic, parallel text, plain-text LM), tokenizers, batching."""

from ablate.data import lm, synthetic, translation  # noqa: F401
