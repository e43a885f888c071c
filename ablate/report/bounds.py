"""How a bound of an interval is printed, in every format that rounds it (the terminal, Markdown, HTML, the plots).

A verdict reads a bound against 0 and the margin: *worse* says the lower bound is above 0, *equivalent* that both are
inside ±m. Rounded to a column's digits, a bound of +0.00003 would print as ``+0.000`` beside *worse*, and 0.0598
as ``+0.060`` beside *equivalent* at a margin of 0.06: an interval that seems to touch the line its verdict says it
clears. :func:`bound` prints a bound with the column's digits and with more where fewer would put it on, or across,
one of those lines, so that its printed value is on the same side of 0 and of ±m as its value (its printed sign is
its sign). The CSV files keep every digit and need none of this.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

_PRECISION = re.compile(r"^(?P<head>.*\.)(?P<digits>\d+)(?P<kind>[efgEFG%]?)$")
MAX_EXTRA = 12  # digits added at most before falling back to every digit (repr)


def lines(margin: float | None) -> tuple[float, ...]:
    """The values a verdict reads a bound against: 0, and ±the margin when there is one."""
    return (0.0,) if not margin else (0.0, -abs(margin), abs(margin))


def _side(x: float, line: float) -> int:
    return int(x > line) - int(x < line)


def bound(value: float, spec: str, against: Iterable[float] = (0.0,)) -> str:
    """``value`` as ``format(value, spec)`` (``spec`` such as ``+.3f`` or ``+.4g``), with as many more digits as it
    takes for the printed number to sit on the same side of each of ``against`` as ``value`` does (on it only when it
    is exactly there)."""
    value = float(value)
    text = format(value, spec)
    if not math.isfinite(value):
        return text
    match = _PRECISION.match(spec)
    against = tuple(against)
    if match is None:
        return text
    head, digits, kind = match["head"], int(match["digits"]), match["kind"]
    for extra in range(MAX_EXTRA + 1):
        text = format(value, f"{head}{digits + extra}{kind}")
        printed = float(text.rstrip("%")) / (100 if kind == "%" else 1)
        if all(_side(printed, line) == _side(value, line) for line in against):
            return text
    return ("+" if "+" in head and value >= 0 else "") + repr(value)


def interval(lo: float, hi: float, spec: str, margin: float | None = None) -> str:
    """``[lo, hi]`` with each bound signed and on the right side of 0 and of ±the margin (:func:`bound`)."""
    sign = spec if spec.startswith("+") else "+" + spec
    return f"[{bound(lo, sign, lines(margin))}, {bound(hi, sign, lines(margin))}]"
