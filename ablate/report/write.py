"""Writing a report to disk (table.md, table.csv, runs.csv, report.html) and uploading it to W&B."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

from ablate.report.table import Report
from ablate.report.records import (EFFECT_COLUMNS, effect_records, run_columns, run_records, table_columns,
                                   table_records, to_csv)
from ablate.report.render import format_markdown
from ablate.runs.files import write_atomic
from ablate.runs.sweep_folder import REPORT_PAGE, TABLE_CSV

LOG = "report.log"  # what the libraries said while the report was made (matplotlib's warnings, wandb's notes)


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]):
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.levelname}: {record.getMessage()}")


@contextlib.contextmanager
def _off_the_screen() -> Iterator[list[str]]:
    """Every warning raised and every line matplotlib logs while the block runs (a variant's name in a script its
    font lacks: "Glyph 23398 missing from font(s) DejaVu Sans"), as lines for the report's log instead of stderr;
    the list is complete once the block has ended."""
    said: list[str] = []
    logger, handler = logging.getLogger("matplotlib"), _Lines(said)
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield said
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
    said += [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


def write_report(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write every format of the report into ``out_dir``, each file atomically.

    Args:
        report: from :func:`ablate.report.build_report`.
        out_dir: created if needed, e.g. ``<sweep_dir>/report``; existing files are replaced.

    Returns:
        The written paths by file name: ``table.md`` (Markdown), ``table.csv`` (one row per variant,
        separate mean, std and n columns, its stratum), ``runs.csv`` (one row per run), ``report.html``; with a
        factorial design or a ladder, ``effects.csv`` (every effect, interaction and slope) and, for a ladder,
        ``trends.svg`` (Δ against size); ``report.log`` when the libraries warned while drawing (a stale one is
        removed otherwise): warnings are kept off the terminal.
    """
    from ablate.report.html import render_html  # imports matplotlib; only the page needs it

    out_dir = Path(out_dir)
    with _off_the_screen() as said:
        texts = {
            "table.md": format_markdown(report),
            TABLE_CSV: to_csv(table_columns(report), table_records(report)),
            "runs.csv": to_csv(run_columns(report), run_records(report)),
            REPORT_PAGE: render_html(report),
        }
        if report.effects or report.trends:
            texts["effects.csv"] = to_csv(list(EFFECT_COLUMNS), effect_records(report))
        if report.trends:
            from ablate.report.plots import trends_svg

            texts["trends.svg"] = trends_svg(report)
    if said:
        texts[LOG] = "".join(f"{line}\n" for line in dict.fromkeys(said))  # each once, in order
    else:
        (out_dir / LOG).unlink(missing_ok=True)
    paths = {}
    for name, text in texts.items():
        paths[name] = out_dir / name
        write_atomic(paths[name], text)
    return paths


def upload_table(report: Report, *, project: str, entity: str | None, group: str, save_dir: Path,
                 mode: str = "auto") -> None:
    """Log the variant table (the columns of table.csv) to W&B as ``<sweep name>-report``.

    Args:
        report: from :func:`ablate.report.build_report`.
        project: the W&B project.
        entity: the W&B entity (user or team); None for the default.
        group: the W&B run group, e.g. the sweep's name, so the table sits beside the sweep's runs.
        save_dir: the folder that receives ``wandb/``.
        mode: ``auto``, ``online``, ``offline`` or ``disabled``, passed through.

    wandb's notes (an offline run's lines on where its data is) are appended to ``save_dir/report.log``, not printed;
    its errors are printed.

    Raises:
        ConfigError: ``mode`` is not a mode (from :func:`ablate.runs.wandb.log_table`).
    """
    from ablate.runs.wandb import log_table  # wandb is heavy; import it only when uploading

    log_table(project=project, entity=entity, group=group, name=f"{report.name}-report",
              columns=table_columns(report), rows=table_records(report), save_dir=save_dir, mode=mode,
              log=Path(save_dir) / LOG)
