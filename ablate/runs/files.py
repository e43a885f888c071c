"""A run directory: where one run's config, metrics, checkpoints and result live.

    <output_dir>/config.yaml        the resolved config
    <output_dir>/logs/version_<k>/  every logged metric, one folder per attempt (Lightning's CSVLogger)
    <output_dir>/checkpoints/       last.ckpt and best.ckpt (lowest val/loss)
    <output_dir>/result.json        status, final and best metrics, parameters, tokens/s, wall time
    <output_dir>/progress.json      every validation metric so far, by step (read by a sweep's pool while it trains)
    <output_dir>/STOP               when present, the run ends at its next step (a sweep's early termination)

Files are written atomically (temp file + rename), so a killed run never leaves a
half-written result or config.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf


PROGRESS_FILE = "progress.json"
STOP_FILE = "STOP"


def config_hash(cfg: DictConfig) -> str:
    """A stable hash of the resolved config: the run's identity. Where it is written (output_dir) and
    how it is logged (wandb: group, name, tags) are not part of it."""
    data = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    data.pop("output_dir", None)
    data.pop("wandb", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def default_output_dir(cfg: DictConfig) -> Path:
    """runs/<name>/<YYYYmmdd-HHMMSS>-<config hash>"""
    return Path("runs") / cfg.name / f"{time.strftime('%Y%m%d-%H%M%S')}-{config_hash(cfg)[:6]}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """The run's result.json, or None when there is none yet."""
    path = Path(run_dir) / "result.json"
    return json.loads(path.read_text()) if path.is_file() else None


def read_metrics(run_dir: Path) -> list[dict[str, float]]:
    """Every logged row of a run, all attempts in order; a resumed attempt's rows replace the
    rows of the steps it repeated. Empty cells are left out of each row."""
    rows: dict[tuple[int, str], dict[str, float]] = {}
    versions = sorted((Path(run_dir) / "logs").glob("version_*"), key=lambda p: int(p.name.split("_")[1]))
    for version in versions:
        path = version / "metrics.csv"
        if not path.is_file():
            continue
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                values = {k: float(v) for k, v in row.items() if v not in ("", None)}
                key = (int(values.get("step", -1)), ",".join(sorted(values)))
                rows[key] = values
    return sorted(rows.values(), key=lambda r: r.get("step", -1))


STEP_FILE = re.compile(r"^step-(?:step=)?(\d+)\.ckpt$")  # step-1200.ckpt (step-step=1200.ckpt: metric name inserted)


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's ``checkpoints/step-*.ckpt``, oldest step first."""
    found = [(int(m.group(1)), p) for p in (Path(run_dir) / "checkpoints").glob("step-*.ckpt")
             if (m := STEP_FILE.match(p.name))]
    return [p for _, p in sorted(found)]
