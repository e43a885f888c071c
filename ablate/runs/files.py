"""A run directory: where one run's config, metrics, checkpoints and result live.

    <output_dir>/config.yaml        the resolved config
    <output_dir>/logs/version_<k>/  every logged metric, one folder per attempt (Lightning's CSVLogger)
    <output_dir>/checkpoints/       last.ckpt and best.ckpt (lowest val/loss)
    <output_dir>/result.json        status, final and best metrics, parameters, tokens/s, wall time
                                    (built by ablate.train.record, solo or a seed array's member)
    <output_dir>/train.log          what ablate said about each attempt (a sweep's run: its whole output)
    <output_dir>/progress.json      every validation metric so far, by step (read by a sweep's pool while it trains)
    <output_dir>/STOP               when present, the run ends at its next step (a sweep's early termination)

Files are written atomically (temp file + rename), so a killed run never leaves a
half-written result or config. These names are this module's: everyone else asks it (``RESULT_FILE``,
``result_path(run_dir)``, ``last_checkpoint(run_dir)``, ...); a sweep folder's ``plan.json`` is
:mod:`ablate.runs.plan`'s.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ablate.config.reads import flatten
from ablate.errors import ConfigError


CONFIG_FILE = "config.yaml"
RESULT_FILE = "result.json"
LOG_FILE = "train.log"
PROGRESS_FILE = "progress.json"
STOP_FILE = "STOP"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_SUFFIX = ".ckpt"
LAST_STEM, BEST_STEM = "last", "best"  # last: the latest step's full state, what a run resumes from; best: the lowest
LAST_CHECKPOINT = f"{LAST_STEM}{CHECKPOINT_SUFFIX}"  # val/loss so far, what ablate evaluate reads by default
BEST_CHECKPOINT = f"{BEST_STEM}{CHECKPOINT_SUFFIX}"
ARRAY_FILE = "array.json"  # in a seed array's own folder, beside its last.ckpt: its members and their config hashes


def config_path(run_dir: str | Path) -> Path:
    """The run's resolved config: ``<run_dir>/config.yaml``."""
    return Path(run_dir) / CONFIG_FILE


def result_path(run_dir: str | Path) -> Path:
    """The run's record: ``<run_dir>/result.json``."""
    return Path(run_dir) / RESULT_FILE


def log_path(run_dir: str | Path) -> Path:
    """What ablate said about each of the run's attempts: ``<run_dir>/train.log``."""
    return Path(run_dir) / LOG_FILE


def checkpoints_dir(run_dir: str | Path) -> Path:
    """The run's checkpoints folder: ``<run_dir>/checkpoints``."""
    return Path(run_dir) / CHECKPOINTS_DIR


def checkpoint_path(run_dir: str | Path, name: str) -> Path:
    """``<run_dir>/checkpoints/<name>.ckpt`` (``name``: last, best, step-1200, ...)."""
    return checkpoints_dir(run_dir) / f"{name}{CHECKPOINT_SUFFIX}"


def last_checkpoint(run_dir: str | Path) -> Path:
    """``<run_dir>/checkpoints/last.ckpt``: what the run resumes from."""
    return checkpoints_dir(run_dir) / LAST_CHECKPOINT


def best_checkpoint(run_dir: str | Path) -> Path:
    """``<run_dir>/checkpoints/best.ckpt``: the lowest val/loss so far."""
    return checkpoints_dir(run_dir) / BEST_CHECKPOINT


NOT_IDENTITY = ("output_dir", "wandb", "trainer.threads", "paths")  # where a run is written, how it is logged, its CPU
# threads, the folders its relative paths were found in (ablate.paths: the paths themselves stay as written)
# Keys that are no identity at their default: trainer.fuse null leaves it to the pool, and hashes stay what they were;
# true and false are asked for (a fused run draws its dropout masks from the array's stream: another run than a solo).
# trainer.attention_kernel: flex is identity as trainer.compile is (another kernel, other rounding); sdpa, the
# default, is not, so that hashes from before the key stay what they were.
NOT_IDENTITY_AT = {"trainer.fuse": None, "trainer.attention_kernel": "sdpa"}


def _identity(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config without :data:`NOT_IDENTITY`'s keys: what makes two runs one run."""
    data = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    for key in [*NOT_IDENTITY, *NOT_IDENTITY_AT]:
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and (key not in NOT_IDENTITY_AT or node.get(leaf) == NOT_IDENTITY_AT[key]):
            node.pop(leaf, None)
    return data


def config_hash(cfg: DictConfig) -> str:
    """A stable hash of the resolved config: the run's identity. Where it is written (output_dir), how it is
    logged (wandb: group, name, tags) and how many CPU threads train it (trainer.threads, as OMP_NUM_THREADS) are
    not part of it."""
    return hashlib.sha256(json.dumps(_identity(cfg), sort_keys=True).encode()).hexdigest()[:12]


def variant_hash(cfg: DictConfig) -> str:
    """What the seeds of one variant share: the config's identity (:func:`config_hash`) without its seed. Runs with
    the same variant hash can train as one seed array (:mod:`ablate.train.array`)."""
    return config_hash(OmegaConf.merge(cfg, {"seed": 0}))


def config_changes(old: DictConfig, new: DictConfig) -> list[str]:
    """The keys whose values differ between two resolved configs, ``key: old -> new``, identity keys left out (what
    :func:`config_hash` leaves out)."""
    flat = [flatten(_identity(c)) for c in (old, new)]
    keys = sorted(set(flat[0]) | set(flat[1]))
    return [f"{k}: {flat[0].get(k, '(unset)')} -> {flat[1].get(k, '(unset)')}" for k in keys
            if flat[0].get(k) != flat[1].get(k)]


TEMPORARY_SUFFIX = ".tmp"  # of the file write_atomic writes through: .<name>.<random>.tmp beside <name>


def being_written(path: Path, entry: Path) -> bool:
    """Whether ``entry`` is a temporary file :func:`write_atomic` is writing ``path`` through (renamed to ``path``
    when it is whole)."""
    return entry.parent == path.parent and entry.name.startswith(f".{path.name}.") and \
        entry.name.endswith(TEMPORARY_SUFFIX)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a run's files are read by whoever reads its checkpoints
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}  # how JSON files spell them


def _encode(value: Any) -> Any:
    """``value`` with every NaN or infinite float spelled as a string: strict JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    """The inverse of :func:`_encode`: "NaN", "Infinity" and "-Infinity" become floats again."""
    if isinstance(value, str):
        return NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as strict JSON (a diverged run's NaN or infinite numbers as strings), atomically."""
    write_atomic(path, json.dumps(_encode(data), indent=2, sort_keys=True, default=str, allow_nan=False) + "\n")


def read_json(path: Path) -> Any:
    """A JSON file written by :func:`write_json` (or an older ablate's, with bare NaN), numbers as they were.

    Raises:
        ConfigError: it cannot be read or is not JSON (edited, or not ablate's), naming the file.
    """
    try:
        return _decode(json.loads(Path(path).read_text()))
    except (OSError, UnicodeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else " ".join(str(exc).split())
        raise ConfigError("file", str(path), f"a JSON file as ablate writes it ({reason})") from None


def read_history(run_dir: Path, metric: str) -> list[float]:
    """The values a run has logged for ``metric``, one per validation (its ``progress.json``); [] before it has."""
    try:
        return [v for _, v in read_json(Path(run_dir) / PROGRESS_FILE).get("history", {}).get(metric, [])]
    except (OSError, ValueError):  # not written yet
        return []


def final_value(result: dict[str, Any], metric: str) -> float | None:
    """A run's value of ``metric`` at its end, from its result: the final value, else the best (a last validation
    that did not log it); None when neither is a number. NaN and infinities are numbers here: a diverged run."""
    for part in (result.get("final") or {}, result.get("best") or {}):
        value = part.get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def write_result(run_dir: Path, result: dict[str, Any], *, merge: bool = False) -> None:
    """Write the run's ``result.json`` (:func:`write_json`: strict, atomic), the one writer of every run's record:
    ``result`` whole, or, ``merge``, its entries over the record already there (an evaluation's, a job's word on how
    its process ended)."""
    write_json(result_path(run_dir), {**((read_result(run_dir) or {}) if merge else {}), **result})


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """The run's result.json, or None when there is none yet.

    Raises:
        ConfigError: it is not a JSON mapping, or a final or best metric in it is not a number, naming the file.
    """
    path = result_path(run_dir)
    if not path.is_file():
        return None
    result = read_json(path)
    if not isinstance(result, dict):
        raise ConfigError("file", str(path), f"a run's result: a JSON mapping (this one is a {type(result).__name__})")
    for section in ("final", "best"):  # the metrics a report compares: numbers, or the run's numbers are not known
        metrics = result.get(section) or {}
        bad = [(k, v) for k, v in metrics.items() if isinstance(v, bool) or not isinstance(v, (int, float))] \
            if isinstance(metrics, dict) else [(section, metrics)]
        if bad:
            raise ConfigError("file", str(path), f"a run's result whose {section} metrics are numbers (this one "
                              f"gives {bad[0][0]}={bad[0][1]!r})")
    return result


def resume_command(run_dir: Path) -> str:
    """The command that resumes the run in ``run_dir``, from any folder: its ``config.yaml`` and folder, absolute (the
    config holds its resolved config, its imports and the folders they and its data were found in, ``paths``, but not
    always its folder: ``output_dir`` is null in a run that ``ablate train`` named itself)."""
    run_dir = Path(os.path.abspath(run_dir))
    return f"ablate train {shlex.quote(str(config_path(run_dir)))} {shlex.quote(f'output_dir={run_dir}')}"


def array_resume_command(run_dirs: list[Path], array_dir: Path) -> str:
    """The command that resumes the seed array of the runs in ``run_dirs`` from its checkpoint in ``array_dir``: each
    member's ``config.yaml`` (its output_dir set: an array's members name their folders), and the array's folder."""
    configs = " ".join(shlex.quote(str(config_path(d))) for d in run_dirs)
    return f"ablate train-array {configs} --array-dir {shlex.quote(str(array_dir))}"


def read_run_config(run_dir: Path) -> DictConfig:
    """The run's config.yaml, as it was written.

    Raises:
        ConfigError: it is missing, or not the YAML mapping ablate writes (edited, cut short, not ablate's), naming it.
    """
    path = config_path(run_dir)
    try:
        cfg = OmegaConf.load(path)
    except OSError as exc:
        raise ConfigError("file", str(path), f"a run's config.yaml ({exc.strerror})") from None
    except Exception as exc:  # yaml's and omegaconf's errors: the file is not what ablate writes
        raise ConfigError("file", str(path), f"a run's config.yaml as ablate writes it ({type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:200]})") from None
    if not isinstance(cfg, DictConfig):
        raise ConfigError("file", str(path), "a run's config.yaml: a YAML mapping (this one is a list)")
    return cfg


def read_metrics(run_dir: Path) -> list[dict[str, float]]:
    """Every logged row of a run, all attempts in order; a resumed attempt's rows replace the
    rows of the steps it repeated. Empty cells are left out of each row."""
    rows: dict[tuple[int, str], dict[str, float]] = {}
    versions = sorted((Path(run_dir) / "logs").glob("version_*"), key=lambda p: int(p.name.split("_")[1]))
    for version in versions:
        path = version / "metrics.csv"
        if not path.is_file():
            continue
        with path.open(newline="", errors="replace") as f:
            for row in csv.DictReader(f):
                try:
                    values = {k: float(v) for k, v in row.items() if k is not None and v not in ("", None)}
                except (TypeError, ValueError):  # a row cut short (the run killed mid-write): not a logged row
                    continue
                key = (int(values.get("step", -1)), ",".join(sorted(values)))
                rows[key] = values
    return sorted(rows.values(), key=lambda r: r.get("step", -1))


STEP_STEM = "step-"  # a step checkpoint: checkpoints/step-<step>.ckpt (the weights after that many steps)
STEP_FILE = re.compile(r"^step-(?:step=)?(\d+)\.ckpt$")  # step-1200.ckpt (step-step=1200.ckpt: metric name inserted)


def step_checkpoint(run_dir: str | Path, step: int) -> Path:
    """The run's step checkpoint of ``step``: ``checkpoints/step-<step>.ckpt``."""
    return checkpoints_dir(run_dir) / f"{STEP_STEM}{step}{CHECKPOINT_SUFFIX}"


def step_of(path: str | Path) -> int:
    """The step a step checkpoint holds, read from its name."""
    return int(STEP_FILE.match(Path(path).name).group(1))


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's ``checkpoints/step-*.ckpt``, oldest step first."""
    found = [p for p in checkpoints_dir(run_dir).glob(f"{STEP_STEM}*{CHECKPOINT_SUFFIX}") if STEP_FILE.match(p.name)]
    return sorted(found, key=step_of)
