"""A verdict's kind and its colour: one palette for the page's badges, the Δ plot, its caption and the terminal.

A verdict as the table says it may carry a qualifier (``equivalent (worse, by less than the margin)``,
``undecided (|Δ| < 0.05) (interim)``); its kind is the verdict name it starts with, so a new qualifier keeps its
colour. The verdict names are :mod:`ablate.stats.verdict`'s; :data:`PALETTE` gives each its colour, in hue order from
the row's gain to its loss: green *better*, teal *not worse* (no loss beyond the margin), blue *equivalent* (neither a
gain nor a loss beyond it), purple *not better* (no gain beyond it), red *worse*; grey for what decides nothing
(*undecided*, *cannot test*, *too few seeds*, *not comparable*). *not better* is no loss: it is never a shade of red.
"""

from __future__ import annotations

from typing import NamedTuple

from ablate.stats.verdict import (BETTER, CANNOT_TEST, EQUIVALENT, NAMES, NOT_BETTER, NOT_COMPARABLE, NOT_WORSE,
                                  TOO_FEW, UNDECIDED, WORSE)

BASE = "base"


class Colour(NamedTuple):
    """One kind's colour in every medium: its name (the caption's word), ``#rrggbb`` (the page, the Δ plot), an ANSI
    SGR code (the terminal; "" for none) and a mark for Markdown, which has no colours of its own."""

    name: str
    hex: str
    ansi: str
    emoji: str


GREY = Colour("grey", "#8a8a8a", "", "⚪")
PALETTE = {NAMES[BETTER]: Colour("green", "#2ca02c", "32", "🟢"),
           NAMES[NOT_WORSE]: Colour("teal", "#138a7e", "36", "🟩"),
           NAMES[EQUIVALENT]: Colour("blue", "#1f77b4", "34", "🔵"),
           NAMES[NOT_BETTER]: Colour("purple", "#8e5cc0", "35", "🟪"),
           NAMES[WORSE]: Colour("red", "#d62728", "31", "🔴"),
           NAMES[UNDECIDED]: GREY, NAMES[CANNOT_TEST]: GREY, NAMES[TOO_FEW]: GREY, NOT_COMPARABLE: GREY,
           BASE: Colour("black", "#222222", "1", "⚫")}
UNDECIDED_COLOR = GREY.hex
COLORS = {k: c.hex for k, c in PALETTE.items() if c is not GREY}  # the kinds that decide something
# the longest names first, so "not worse" is not read as "worse"
KINDS = tuple(sorted((*NAMES, BASE, NOT_COMPARABLE), key=len, reverse=True))


def kind(verdict: str | None) -> str:
    """The verdict name ``verdict`` starts with (``not worse``, ``equivalent``, ``base``, ...); "" for none."""
    text = (verdict or "").strip()
    return next((k for k in KINDS if text == k or text.startswith(k + " ") or text.startswith(k + ":")), "")


def colour_of(verdict: str | None) -> Colour:
    """The verdict's :class:`Colour`; grey for the kinds that decide nothing and for a cell that is no verdict."""
    return PALETTE.get(kind(verdict), GREY)


def color(verdict: str | None) -> str:
    """The verdict's colour as ``#rrggbb``."""
    return colour_of(verdict).hex


def caption() -> str:
    """The colours as a figure's caption says them, every verdict name under its colour: ``green: better, teal: not
    worse, ..., grey: undecided, cannot test, too few seeds, not comparable``."""
    names: dict[str, list[str]] = {}
    for name, colour in PALETTE.items():
        if name != BASE:
            names.setdefault(colour.name, []).append(name)
    return ", ".join(f"{colour}: {', '.join(kinds)}" for colour, kinds in names.items())


def css_class(verdict: str | None) -> str:
    """``v-better``, ``v-not-worse``, ``v-undecided``: the badge's class in the page."""
    return "v-" + (kind(verdict) or "none").replace(" ", "-")


def badge_css() -> str:
    """The page's style of every kind's badge: white text on the kind's colour."""
    rules = [f".badge.{css_class(k)} {{ background: {color(k)}; }}" for k in KINDS]
    return "\n".join([".badge { display: inline-block; padding: 0.05em 0.55em; border-radius: 0.8em; color: #fff; "
                      f"background: {GREY.hex}; white-space: normal; }}", *rules])


def ansi(text: str, verdict: str | None) -> str:
    """``text`` in the verdict's terminal colour (bold for the base); unchanged for the kinds that decide nothing."""
    code = colour_of(verdict).ansi
    return f"\033[{code}m{text}\033[0m" if code else text


def marked(verdict: str) -> str:
    """The verdict after a coloured mark for Markdown: ``🔴 worse``; a cell that is no verdict (``—``) as it is."""
    return f"{colour_of(verdict).emoji} {verdict}" if kind(verdict) else verdict
