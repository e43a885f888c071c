"""The verdict at a glance: badges coloured by the verdict's kind, the Δ plot's cut axis, a terminal table within
120 columns, and a page that fits a 1000 px window in headless Chromium."""

from __future__ import annotations

import re
import subprocess

import pytest

from ablate.report import badges, build_report, format_terminal
from ablate.report.forest import FAR, axis_limits, deltas_svg
from ablate.report.html import render_html
from ablate.report.render import WIDTH
from ablate.stats.verdict import LEAKS
from ablate.stats.design import Design, Margin
from ablate.stats.verdict import NAMES
from tests.report.conftest import make_sweep, make_verdict_sweep
from tests.report.test_report import chromium
from tests.report.test_verdicts import BASE, make


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    return build_report(make_verdict_sweep(tmp_path_factory.mktemp("glance")))


@pytest.mark.parametrize("name", NAMES)
def test_a_verdict_s_kind_is_its_leading_name_whatever_qualifies_it(name):
    for text in (name, f"{name} (interim)", f"{name} (worse, by less than the margin) (interim)"):
        assert badges.kind(text) == name
        assert badges.css_class(text) == "v-" + name.replace(" ", "-")
    assert badges.color(f"{name} (interim)") == badges.COLORS.get(name, badges.UNDECIDED_COLOR)


def test_not_worse_is_not_read_as_worse_and_the_other_cells_have_no_kind():
    assert (badges.kind("not worse (fails less often)") == "not worse"
            and badges.kind("worse (fails more often)") == "worse")
    assert badges.kind(LEAKS) == "not comparable" and badges.kind("base") == "base"
    assert badges.kind("—") == badges.kind("") == badges.kind("worsening") == ""
    assert badges.color("equivalent (better, by less than the margin)") == badges.COLORS["equivalent"]


def test_each_verdict_of_the_page_is_a_badge_of_its_kind(quickstart):
    page = render_html(quickstart)
    assert page.count('<span class="badge v-worse">worse</span>') == 2 * 2  # the verdict view and every column
    assert page.count('<span class="badge v-equivalent">equivalent</span>') == 2
    assert f".badge.v-worse {{ background: {badges.COLORS['worse']}; }}" in page
    # the Δ plot comes first, then the verdict view; the definitions and every column are folded under it
    order = [page.index(s) for s in ('id="deltas"', '<table id="verdicts"', '<details id="definitions">',
                                     '<details id="every-column">', 'id="curves"')]
    assert order == sorted(order)


def test_the_delta_axis_is_cut_so_one_far_row_does_not_squash_the_others():
    near = [(0.021, 0.251, 0.136), (-0.052, 0.081, 0.014)]
    far = (1.468, 1.770, 1.619)
    (left, right), cut = axis_limits([*near, far], margin=0.1)
    assert cut and right < far[0] and left < -0.1 and right > 0.251
    assert (0.251 - -0.052) / (right - left) > 0.7  # the near rows fill most of the axis
    assert axis_limits(near, margin=0.1) == ((left, right), False)  # the same axis without the far row
    # a row is far beyond FAR times the typical row's reach: just inside, nothing is cut
    typical = 0.251
    assert not axis_limits([*near, (0.0, FAR * typical, 0.5)], margin=0.1)[1]
    assert axis_limits([*near, (0.0, FAR * typical * 1.01, 0.5)], margin=0.1)[1]


def test_the_far_row_is_written_beside_its_arrow(quickstart):
    svg = deltas_svg(quickstart)
    none = next(r for r in quickstart.variants if r.name == "none").comparison
    lo, hi = none.interval
    assert f"Δ {none.diff:+.3g} [{lo:+.3g}, {hi:+.3g}]" in svg and "axis cut" in svg


def test_the_terminal_table_fits_120_columns_by_default(quickstart, tmp_path):
    long_names = {"base": BASE, "a-variant-name-of-forty-characters-----": [(s, v + 0.1 + 0.005 * s) for s, v in BASE],
                  "v": [(0, 3.0), (1, 3.1), (2, 2.9), (3, "running")]}
    wide = build_report(make(tmp_path / "long", long_names, design=Design(margin=Margin(0.2))))
    for report in (quickstart, build_report(make_sweep(tmp_path)), wide):
        text = format_terminal(report)
        assert max(map(len, text.splitlines())) <= WIDTH, text
    words = " ".join(format_terminal(wide).split())
    assert "equivalent (worse, by less than the margin)" in words  # wrapped under itself, every word kept
    assert max(map(len, format_terminal(quickstart, wide=True).splitlines())) > WIDTH  # --wide: every column


MEASURE = """<script>
for (const open of [false, true]) {
  document.querySelectorAll('details').forEach(d => d.open = open);
  const root = document.documentElement, cells = [...document.querySelectorAll('#verdicts .badge')];
  const out = document.createElement('pre');
  out.id = 'measure-' + open;
  out.textContent = JSON.stringify({scroll: root.scrollWidth, client: root.clientWidth,
    badges: cells.length, right: Math.max(...cells.map(c => c.getBoundingClientRect().right)),
    plot: document.querySelector('#deltas svg').getBoundingClientRect().width});
  document.body.append(out);
}
</script>"""


@pytest.mark.skipif(chromium() is None, reason="no chromium binary on PATH (apt-get install -y chromium)")
@pytest.mark.parametrize("sweep, width, n_badges", [("quickstart", 1000, 4), ("quickstart", 1400, 4),
                                                     ("failures", 1000, 2)])
def test_the_page_fits_its_window_with_every_verdict_in_view(quickstart, tmp_path, sweep, width, n_badges):
    """Measured in the page by a script added to a copy (the report itself has none): no horizontal scrollbar with
    the folds closed or open, and every verdict badge inside the window; ``failures``: conftest's sweep with a
    failed run's long error in its wide table and a pending row (no badge)."""
    import json

    report = quickstart if sweep == "quickstart" else build_report(make_sweep(tmp_path))
    page = tmp_path / "report.html"
    page.write_text(render_html(report).replace("</body>", MEASURE + "\n</body>"))
    args = [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=127.0.0.1:9", f"--window-size={width},1200"]
    dom = subprocess.run([*args, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    for open_ in ("false", "true"):
        m = json.loads(re.search(rf'<pre id="measure-{open_}">(.*?)</pre>', dom).group(1).replace("&quot;", '"'))
        assert m["client"] == width and m["scroll"] <= width, (open_, m)
        assert m["badges"] == n_badges and m["right"] <= width and m["plot"] > 400, (open_, m)


def test_ablate_report_prints_the_verdict_view_and_every_column_with_wide(tmp_path, capsys):
    from ablate.cli import main

    sweep = make_verdict_sweep(tmp_path)
    assert main(["report", str(sweep)]) == 0
    narrow = capsys.readouterr().out
    assert main(["report", str(sweep), "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "ablate report --wide" in narrow and "detectable Δ" not in narrow and "\033[" not in narrow  # not a tty
    assert "detectable Δ" in wide and "Mean ± sample std" in wide
    assert narrow.splitlines()[-1].endswith("report.html")  # the page's path, as long as the folder's
    assert max(map(len, narrow.splitlines()[:-1])) <= WIDTH < max(map(len, wide.splitlines()))
