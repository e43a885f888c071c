"""Screenshots of ``report.html`` at 1000 px and 1400 px, of a synthetic sweep like the README's quickstart.

    python docs/screenshots.py            # writes docs/report_1000px.png and docs/report_1400px.png

The sweep is :func:`tests.report.conftest.make_verdict_sweep` (learned worse, RoPE equivalent, none far off and
worse, a margin of 0.1, a sequential design of 3 to 10 seeds) with two rows more, so that every colour of a decision
shows: alibi *not better* and relative *not worse* (five seeds each); headless Chromium (``apt-get install chromium``)
takes the pictures, offline. Nothing here trains.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ablate.report import build_report  # noqa: E402
from ablate.report.html import render_html  # noqa: E402
from tests.report.conftest import QUICKSTART, make_verdict_sweep  # noqa: E402

SIZES = {1000: 1600, 1400: 1150}  # window width: height (the top of the page: the verdicts, then the runs' plots)
MORE = {"alibi": (5, 0.04), "relative": (5, -0.04)}  # seeds, mean Δ: not better, not worse


def main() -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("docs/screenshots.py: no chromium on PATH (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        report = build_report(make_verdict_sweep(Path(tmp), {**QUICKSTART, **MORE}), now=datetime(2026, 11, 26, 7, 0))
        page = Path(tmp) / "report.html"
        page.write_text(render_html(replace(report, sweep_dir=Path("sweeps/quickstart"))))
        for width, height in SIZES.items():
            shot = ROOT / "docs" / f"report_{width}px.png"
            subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                            "--hide-scrollbars", f"--user-data-dir={Path(tmp) / 'profile'}",
                            f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri()],
                           check=True, capture_output=True, timeout=120)
            print(shot.relative_to(ROOT))


if __name__ == "__main__":
    main()
