"""The verdicts' colours follow the verdict vocabulary: every verdict name of :mod:`ablate.stats.verdict` has a
colour, *not better* and *not worse* have colours of their own (never a shade of *worse*'s red or *better*'s green),
and the Δ plot's caption names every verdict under its colour."""

from __future__ import annotations

import re
from html import unescape

import pytest

from ablate.report import badges, build_report
from ablate.report.html import render_html
from ablate.stats.verdict import DECIDED, NAMES, NOT_BETTER, NOT_WORSE
from tests.report.conftest import make_verdict_sweep


def _hue(hex_colour: str) -> float:
    """The colour's hue in degrees (HSV)."""
    import colorsys

    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 360 * colorsys.rgb_to_hsv(r, g, b)[0]


@pytest.mark.parametrize("name", NAMES)
def test_every_verdict_name_has_a_colour_in_every_medium(name):
    colour = badges.PALETTE[name]
    assert re.fullmatch(r"#[0-9a-f]{6}", colour.hex) and colour.name and colour.emoji
    assert badges.color(name) == colour.hex and badges.kind(name) == name


def test_the_verdicts_that_decide_something_each_have_their_own_colour():
    deciding = [NAMES[c] for c in (*DECIDED, NOT_WORSE, NOT_BETTER)]
    colours = [badges.PALETTE[n] for n in deciding]
    for field in ("name", "hex", "ansi", "emoji"):
        assert len({getattr(c, field) for c in colours}) == len(deciding), field
    assert badges.GREY not in colours


def test_not_better_is_no_shade_of_red_nor_not_worse_of_green():
    """A row that is *not better* has lost nothing beyond the margin: read as a loss it misleads (issue 38)."""
    red, green = _hue(badges.color("worse")), _hue(badges.color("better"))
    for name, other in (("not better", red), ("not worse", green)):
        gap = abs(_hue(badges.color(name)) - other)
        assert min(gap, 360 - gap) > 45, name
    assert badges.PALETTE["not better"].ansi != badges.PALETTE["worse"].ansi
    assert badges.PALETTE["not worse"].ansi != badges.PALETTE["better"].ansi


def test_the_caption_names_every_verdict_under_its_colour():
    text = badges.caption()
    for name in NAMES:
        colour = badges.PALETTE[name].name
        group = re.search(rf"{colour}: ([^:]*?)(?:, \w+:|$)", text)
        assert group and name in group[1].split(", "), (name, text)


def test_the_page_s_delta_plot_caption_and_badges_use_the_palette(tmp_path):
    page = render_html(build_report(make_verdict_sweep(tmp_path)))
    caption = unescape(re.search(r'<figure id="deltas">.*?<figcaption>(.*?)</figcaption>', page, re.S)[1])
    assert badges.caption() in caption
    for name in NAMES:
        assert f".badge.{badges.css_class(name)} {{ background: {badges.color(name)}; }}" in page
    assert "#e89090" not in page  # the light red that painted *not better* as a loss
