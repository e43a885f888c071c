"""The command line's numeric options, as argparse types: a value that reads as a number, is finite and is in its
range, or one line saying what is allowed.

``float("inf")`` and ``float("nan")`` parse, so ``type=float`` lets ``--temperature inf`` through (every logit divided
by inf: the sample is noise) and ``nan`` through a check written as ``v >= 0`` turned around. :class:`Number` refuses
them where the option is read, before any model loads: argparse then names the option (``argument --temperature:
'inf' is not allowed; expected a finite number >= 0 (0: greedy)``) and the command exits 2, as for any bad input.
"""

from __future__ import annotations

import argparse
import math


class Number:
    """An argparse ``type``: the text as an integer (``integer``) or a float, refused unless it is finite and from
    ``low`` to ``high`` (above ``low`` when ``above``).

    Args:
        low: the smallest value allowed (the bound it must exceed with ``above``).
        high: the largest, or None.
        integer: whole numbers only (``1e3`` and ``2.0`` are refused: the option counts something).
        above: ``low`` itself is refused (a share of a GPU: more than 0).
        note: what a special value means, said with the allowed range: ``0: greedy``.
    """

    def __init__(self, low: float, high: float | None = None, *, integer: bool = False, above: bool = False,
                 note: str = ""):
        self.low, self.high, self.integer, self.above, self.note = low, high, integer, above, note
        self.__name__ = "integer" if integer else "number"  # argparse's name for the type, in its own messages

    @property
    def allowed(self) -> str:
        """What the option takes, in words: ``a positive integer up to 1,000``, ``a finite number >= 0``."""
        if self.integer:
            kind = {1: "a positive integer", 0: "a non-negative integer"}.get(int(self.low))
            words = (f"{kind} up to {self.high:,}" if self.high is not None else kind) if kind else \
                f"an integer from {self.low:,}" + (f" to {self.high:,}" if self.high is not None else "")
        else:
            words = f"a finite number {'>' if self.above else '>='} {self.low:g}" + \
                (f" and <= {self.high:g}" if self.high is not None else "")
        return words + (f" ({self.note})" if self.note else "")

    def __call__(self, text: str) -> int | float:
        try:
            value: int | float = int(text) if self.integer else float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > self.low if self.above else value >= self.low)
                and (self.high is None or value <= self.high)):
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected {self.allowed}")
        return value

    def __repr__(self) -> str:
        return f"Number({self.allowed})"
