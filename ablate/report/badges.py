"""A verdict's kind and its colour: one palette for the page's badges, the Δ plot and the terminal.

A verdict as the table says it may carry a qualifier (``equivalent (worse, by less than the margin)``,
``undecided (|Δ| < 0.05) (interim)``); its kind is the verdict name it starts with, so a new qualifier keeps its
colour. Green: the row is better; red: worse; blue: equivalent within the margin; pale green / pale red: not worse /
not better; grey: nothing decided (undecided, too few seeds, cannot test, not comparable).
"""

from __future__ import annotations

from ablate.stats.verdict import NAMES

BASE = "base"
NOT_COMPARABLE = "not comparable"  # a row whose mask leaks labels (table.LEAKS starts with it)
UNDECIDED_COLOR = "#8a8a8a"
COLORS = {"better": "#2ca02c", "worse": "#d62728", "equivalent": "#1f77b4", "not worse": "#7fbf7f",
          "not better": "#e89090", BASE: "#222222"}
EMOJI = {"better": "🟢", "worse": "🔴", "equivalent": "🔵", "not worse": "🟩", "not better": "🟥", BASE: "⚫"}
ANSI = {"better": "32", "worse": "31", "equivalent": "34", "not worse": "32", "not better": "31", BASE: "1"}
# the longest names first, so "not worse" is not read as "worse"
KINDS = tuple(sorted((*NAMES, BASE, NOT_COMPARABLE), key=len, reverse=True))


def kind(verdict: str | None) -> str:
    """The verdict name ``verdict`` starts with (``not worse``, ``equivalent``, ``base``, ...); "" for none."""
    text = (verdict or "").strip()
    return next((k for k in KINDS if text == k or text.startswith(k + " ") or text.startswith(k + ":")), "")


def color(verdict: str | None) -> str:
    """The verdict's colour as ``#rrggbb``; grey for the kinds that decide nothing."""
    return COLORS.get(kind(verdict), UNDECIDED_COLOR)


def css_class(verdict: str | None) -> str:
    """``v-better``, ``v-not-worse``, ``v-undecided``: the badge's class in the page."""
    return "v-" + (kind(verdict) or "none").replace(" ", "-")


def badge_css() -> str:
    """The page's style of every kind's badge: white text on the kind's colour (dark text on the pale ones)."""
    rules = [f".badge.{css_class(k)} {{ background: {color(k)}; }}" for k in KINDS]
    return "\n".join([".badge { display: inline-block; padding: 0.05em 0.55em; border-radius: 0.8em; color: #fff; "
                      f"background: {UNDECIDED_COLOR}; white-space: normal; }}", *rules,
                      f".badge.{css_class('not worse')}, .badge.{css_class('not better')} {{ color: #222; }}"])


def ansi(text: str, verdict: str | None) -> str:
    """``text`` in the verdict's terminal colour (bold for the base); unchanged for the kinds that decide nothing."""
    code = ANSI.get(kind(verdict))
    return f"\033[{code}m{text}\033[0m" if code else text


def marked(verdict: str) -> str:
    """The verdict after a coloured mark for Markdown, which has no colours of its own: ``🔴 worse``; a cell that is
    no verdict (``—``) as it is."""
    return f"{EMOJI.get(kind(verdict), '⚪')} {verdict}" if kind(verdict) else verdict
