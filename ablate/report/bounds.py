"""How a bound of an interval is printed, in every format that rounds it (the terminal, Markdown, HTML, the plots).

A verdict reads a bound against 0 and the margin: *worse* says the lower bound is above 0, *equivalent* that both are
inside ±m. Rounded to a column's digits, a bound of +0.00003 would print as ``+0.000`` beside *worse*, and 0.0598
as ``+0.060`` beside *equivalent* at a margin of 0.06: an interval that seems to touch the line its verdict says it
clears. :func:`bound` prints a bound with the column's digits and with more where fewer would put it on, or across,
one of those lines, so that its printed value is on the same side of 0 and of ±m as its value (its printed sign is
its sign). Δ is printed by the same rule (:func:`signed`): a Δ of +0.00004 beside *worse* is never ``+0.000``.

*undecided (|Δ| < x)* says every Δ the interval allows is within ±x: x is a bound the other way, so :func:`at_least`
rounds it up at its last digit (the interval [-0.000126, +0.0003375] is ``|Δ| < 0.000338``, never ``0.000337``, which
the interval's upper end exceeds). The CSV files keep every digit and need none of this.
"""

from __future__ import annotations

import decimal
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


def _printed(value: float, spec: str, against: tuple[float, ...], fmt) -> tuple[str, str] | None:
    """``fmt(value, spec)`` with as few digits more than ``spec``'s as put the printed number on the same side of each
    of ``against`` as ``value``, and the spec that printed it; None when :data:`MAX_EXTRA` more do not (or ``spec``
    names no precision)."""
    match = _PRECISION.match(spec)
    if match is None:
        return None
    head, digits, kind = match["head"], int(match["digits"]), match["kind"]
    for extra in range(MAX_EXTRA + 1):
        chosen = f"{head}{digits + extra}{kind}"
        text = fmt(value, chosen)
        printed = float(text.rstrip("%")) / (100 if kind == "%" else 1)
        if all(_side(printed, line) == _side(value, line) for line in against):
            return text, chosen
    return None


def _every_digit(value: float, spec: str) -> str:
    return ("+" if "+" in spec and value >= 0 else "") + repr(value)


def bound(value: float, spec: str, against: Iterable[float] = (0.0,)) -> str:
    """``value`` as ``format(value, spec)`` (``spec`` such as ``+.3f`` or ``+.4g``), with as many more digits as it
    takes for the printed number to sit on the same side of each of ``against`` as ``value`` does (on it only when it
    is exactly there)."""
    value = float(value)
    if not math.isfinite(value):
        return format(value, spec)
    if _PRECISION.match(spec) is None:
        return format(value, spec)
    found = _printed(value, spec, tuple(against), format)
    return found[0] if found else _every_digit(value, spec)


def signed(value: float, spec: str, margin: float | None = None) -> str:
    """Δ (or a bound) signed, by :func:`bound`'s rule against 0 and ±``margin``: ``+0.00004``, not ``+0.000``."""
    return bound(value, spec if spec.startswith("+") else "+" + spec, lines(margin))


def _ceiling(value: float, spec: str) -> str:
    """``format(value, spec)`` rounded up (towards +inf) at its last digit instead of to the nearest: the decimal
    digits of ``repr(value)`` (the shortest text that reads back as ``value``) rounded up, printed as a float is."""
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.rounding = 60, decimal.ROUND_CEILING
        text = format(decimal.Decimal(repr(value)), spec)
    number = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    return format(number, spec)  # the same digits, in float's style (``1e+03``, not Decimal's ``1.00e+3``)


def at_least(value: float, spec: str, against: Iterable[float] = (0.0,)) -> str:
    """``value`` with :func:`bound`'s digits, rounded up at the last of them: the printed number is never below
    ``value`` and above it by less than one unit of its last digit (more digits where rounding up would cross one of
    ``against``). For a number that bounds something from above, such as undecided's x in ``|Δ| < x``."""
    value, against = float(value), tuple(against)
    if not math.isfinite(value):
        return format(value, spec)
    nearest = _printed(value, spec, against, format)  # bound()'s digits
    up = _printed(value, nearest[1], against, _ceiling) if nearest else None
    return up[0] if up else _every_digit(value, spec)  # every digit: exactly value


def interval(lo: float, hi: float, spec: str, margin: float | None = None) -> str:
    """``[lo, hi]`` with each bound signed and on the right side of 0 and of ±the margin (:func:`bound`)."""
    sign = spec if spec.startswith("+") else "+" + spec
    return f"[{bound(lo, sign, lines(margin))}, {bound(hi, sign, lines(margin))}]"
