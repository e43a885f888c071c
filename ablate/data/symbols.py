"""The text of a synthetic task: its symbols written as whole numbers, ``"3 17 9"``, so a run can be inspected.

A synthetic task has no tokenizer (nothing to train: its symbols are ids ``first .. vocab_size - 1``), yet
``ablate generate`` and ``ablate attention`` read and write text. :class:`Symbols` is that text, with the
tokenizer's interface those commands use (``encode``, ``decode``, ``piece``, the special ids): a reversal run
given ``"3 4 5 6"`` answers ``"6 5 4 3"`` when it has learned its task.
"""

from __future__ import annotations

from collections.abc import Sequence


class Symbols:
    """Symbol ids as whitespace-separated whole numbers; pad, BOS and EOS have no text.

    Args:
        first: the first symbol id (the ids below it are pad, BOS and EOS).
        vocab_size: one past the last symbol id.
        pad_id, bos_id, eos_id: the special ids, as the task's data config sets them.
    """

    from_cache = True  # nothing is trained: the same symbols every time

    def __init__(self, first: int, vocab_size: int, *, pad_id: int, bos_id: int, eos_id: int):
        self.first, self.vocab_size = first, vocab_size
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    @property
    def allowed(self) -> str:
        return (f"symbols as whole numbers from {self.first} to {self.vocab_size - 1}, separated by spaces "
                f"(e.g. '{' '.join(str(i) for i in range(self.first, min(self.first + 4, self.vocab_size)))}')")

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``, e.g. ``"3 17 9"`` -> [3, 17, 9].

        Raises:
            ValueError: a word is not a symbol id (its message says what is allowed).
        """
        try:
            ids = [int(word) for word in text.split()]
        except ValueError:
            ids = [-1]
        if any(not self.first <= i < self.vocab_size for i in ids):
            raise ValueError(self.allowed)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The symbols among ``ids`` as text; pad, BOS and EOS decode to nothing."""
        return " ".join(str(int(i)) for i in ids if int(i) >= self.first)

    def piece(self, i: int) -> str:
        """One id as a label: its number, or ``<pad>``, ``<s>``, ``</s>``."""
        special = {self.pad_id: "<pad>", self.bos_id: "<s>", self.eos_id: "</s>"}
        return special.get(int(i), str(int(i)))
