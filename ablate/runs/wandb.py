"""Weights & Biases logging: the run logger for ``logger: wandb``, report tables, and ``ablate sync``.

Without an API key ablate logs offline by itself (wandb would raise, or wait at a login prompt);
everything W&B writes lands in ``<run_dir>/wandb/``, and :func:`sync` uploads it later. A run keeps
its W&B run id in ``<run_dir>/wandb/ablate-run-id``, so resuming a run directory continues the same
W&B run. wandb is imported only when used.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.loggers import WandbLogger
from pytorch_lightning.loggers.logger import rank_zero_experiment
from pytorch_lightning.utilities import rank_zero_only

from ablate.config.schema import Logger as LoggerKind
from ablate.config.schema import WandbMode
from ablate.errors import COMMAND_LINE, ConfigError
from ablate.runs.files import config_hash, log_path, read_result, write_atomic
from ablate.runs.metrics import TEST_BLEU, VAL_ACC, VAL_BLEU, VAL_LOSS, VAL_PPL, steps_done
from ablate.runs.wandb_offline import SUPERSEDED_FILE, offline_folders, offline_runs, server_unreachable
from ablate.runs.status import Status

MODES = tuple(m.value for m in WandbMode)
_ENV_MODES = {"online": "online", "run": "online", "offline": "offline", "dryrun": "offline", "disabled": "disabled",
              "shared": "shared"}  # what wandb accepts in WANDB_MODE
STEP_METRIC = "step"  # every metric's x-axis: optimiser steps done, result.json's step (W&B's own _step is the same)
SUMMARIES = {VAL_LOSS: "min", VAL_PPL: "min", VAL_ACC: "max", VAL_BLEU: "max", TEST_BLEU: "max"}
RESULT_KEYS = ("status", "step", "parameters", "tokens_per_s", "train_tokens", "wall_time_s", "error")
RUN_ID_FILE = Path("wandb") / "ablate-run-id"


STUDY = "wandb.study."  # the flat config's copy of the study, put at the top of the W&B config instead


def resolve_mode(configured: str) -> str:
    """The wandb mode to run in; never prompts, never touches the network.

    Args:
        configured: ``wandb.mode``: ``auto``, ``online``, ``offline`` or ``disabled``. ``auto``
            follows ``WANDB_MODE`` when set, else is ``online`` when an API key is configured
            (``WANDB_API_KEY``, or a netrc entry for the W&B host), else ``offline``.

    Returns:
        ``online``, ``offline``, ``disabled`` (or ``shared``, when WANDB_MODE asks for it).

    Raises:
        ConfigError: ``configured`` or ``WANDB_MODE`` is not a mode.
    """
    configured = getattr(configured, "value", configured)  # a WandbMode from a config, or a plain string
    if configured not in MODES:
        raise ConfigError("wandb.mode", configured, f"one of {', '.join(MODES)}")
    if configured != "auto":
        return configured
    if env := os.environ.get("WANDB_MODE"):
        if env.strip().lower() not in _ENV_MODES:
            raise ConfigError("WANDB_MODE", env, f"one of {', '.join(_ENV_MODES)}", source="environment")
        return _ENV_MODES[env.strip().lower()]
    return "online" if has_api_key() else "offline"


def check_credentials(configured: str) -> str:
    """The mode :func:`resolve_mode` gives, once it is one this machine can log in: online (or shared) needs an API
    key, which is looked up without the network (:func:`has_api_key`).

    Raises:
        ConfigError: the mode is not a mode, or asks for the server without a key, naming where the mode came from.
    """
    mode = resolve_mode(configured)
    if mode in ("online", "shared") and not has_api_key():
        configured = getattr(configured, "value", configured)
        key, value, source = (("WANDB_MODE", os.environ.get("WANDB_MODE"), "environment") if configured == "auto"
                              else ("wandb.mode", configured, None))
        raise ConfigError(key, value, f"a mode this machine can log in with: {mode} needs a W&B API key (`wandb "
                          "login`, or WANDB_API_KEY), and none is configured; or WANDB_MODE=offline", source)
    return mode


def has_api_key() -> bool:
    """Whether wandb would find credentials without prompting: ``WANDB_API_KEY``,
    ``WANDB_IDENTITY_TOKEN_FILE``, a key given to ``wandb.login()`` in this process, or a netrc
    entry for the W&B host (``WANDB_BASE_URL`` or ``wandb login --host``). Reads files only."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:  # the lookup wandb.init() itself does (wandb 0.31); it reads settings and netrc files, no network
        from wandb.errors import AuthenticationError
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth
    except ImportError:  # a wandb without wbauth: only the environment counts; set wandb.mode=online
        return False
    host = wandb_setup.singleton().settings.base_url
    try:
        return bool(wbauth.session_credentials(host=host) or wbauth.read_netrc_auth(host=host))
    except AuthenticationError:  # a malformed key is still a key: wandb.init() will say what is wrong
        return True


def flatten(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as flat dotted keys, for the W&B runs table, group-by and parallel coordinates.

    Args:
        cfg: a run config.

    Returns:
        ``{"model.n_heads": 8, "train.schedule_args.warmup": 4000, "train.betas": [0.9, 0.98], ...}``:
        lists stay lists, enums become their names; an empty mapping has no leaves and is left out.
    """
    flat: dict[str, Any] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                flat[f"{prefix}{key}"] = value

    walk(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True), "")
    return flat


def wandb_config(cfg: DictConfig) -> dict[str, Any]:
    """A run's W&B config: the flat config (:func:`flatten`) and, for a sweep's run, its place in the study at the top:
    ``sweep`` (the sweep folder's group), ``row``, ``variant``, ``seed`` and its level of each factor, beside each
    swept key's own dotted name."""
    flat = {k: v for k, v in flatten(cfg).items() if not k.startswith(STUDY)}
    study = OmegaConf.to_container(cfg.wandb.study, resolve=True) if cfg.wandb.get("study") else {}
    return {**flat, **({"sweep": cfg.wandb.group or cfg.name} if study else {}), **study}


def run_id(cfg: DictConfig, run_dir: Path) -> str:
    """The W&B run id of a run directory, kept in ``<run_dir>/wandb/ablate-run-id``.

    ``WANDB_RUN_ID`` (set by a W&B agent for the point it hands out) wins, and is kept. A new id is
    the config hash plus 8 random hex digits: a hash of the path alone would collide in the W&B
    project whenever two machines train into the same path (CI, ``output_dir=run``).
    """
    path = Path(run_dir) / RUN_ID_FILE
    if env := os.environ.get("WANDB_RUN_ID"):
        write_atomic(path, env + "\n")
        return env
    if path.is_file() and (stored := path.read_text().strip()):
        return stored
    new = f"{config_hash(cfg)[:8]}{secrets.token_hex(4)}"
    write_atomic(path, new + "\n")
    return new


def _settings() -> Any:
    """Quiet (wandb still notes an offline run's folder on stderr), no console capture, no prompts."""
    import wandb

    return wandb.Settings(quiet=True, console="off")


class _RunLogger(WandbLogger):
    """A WandbLogger that logs at the step each value belongs to, defines ablate's summaries when its run starts, and
    finishes the run, with the outcome from ``result.json``, when :func:`ablate.train.run.train` finalizes it.
    wandb's notes when the run starts and ends (an offline run's folder, how to sync it) go to the run's
    ``train.log``, not the terminal; its errors still reach stderr (:func:`errors_only`).

    A run's W&B history holds each step once, however often it was killed and resumed. Every value is logged at
    :data:`STEP_METRIC`, the optimiser steps done (:func:`ablate.runs.metrics.steps_done`), as W&B's own step too.
    Online, a resumed run continues the server's history: the steps it already holds (trained again after the
    checkpoint, to the same values) are not sent twice. Offline, wandb cannot resume (each attempt writes a folder of
    its own, from step 0, and ``wandb sync`` of a second folder of one id writes over the first's history): the
    resumed attempt first logs again, from the CSV logs, every row of the earlier attempts before its first step, so
    that its folder holds the whole history, and the earlier folders are listed in ``wandb/ablate-superseded`` for
    :func:`sync` to leave out.
    """

    def __init__(self, *, run_dir: Path, **kwargs: Any):
        super().__init__(**kwargs)
        self._wandb_init.pop("anonymous", None)  # wandb 0.31 warns that this setting has no effect
        self._run_dir = Path(run_dir)
        self._first_step: int | None = None  # this attempt's first logged step, once it has logged

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        fresh = self._experiment is None
        with errors_only(log_path(self._run_dir)) if fresh else contextlib.nullcontext():
            run = super().experiment  # created lazily, on first use; wandb's notes on where it is into train.log
        if fresh:
            run.define_metric(STEP_METRIC)
            run.define_metric("*", step_metric=STEP_METRIC, step_sync=True)  # replaces WandbLogger's x-axis
            for name, summary in SUMMARIES.items():
                run.define_metric(name, summary=summary, step_metric=STEP_METRIC, step_sync=True)
        return run

    @rank_zero_only
    def log_metrics(self, metrics: Any, step: int | None = None) -> None:
        if step is None:  # outside training: no step to place it at
            return super().log_metrics(metrics, step)
        done = steps_done(step)
        run = self.experiment
        if self._first_step is None:
            self._first_step = done
            if run.offline:
                self._replay_before(done)
        if done < run.step:  # online, a resumed run: the server holds this step already
            return
        run.log({**metrics, STEP_METRIC: done}, step=done)

    def _replay_before(self, first: int) -> None:
        """Log the earlier attempts' rows of the steps before ``first`` (the CSV logger's, which got the same values),
        and list the earlier offline folders of this run as superseded."""
        from ablate.runs.files import read_metrics

        run = self.experiment
        for row in read_metrics(self._run_dir):  # metrics.csv's steps are steps done too (:class:`StepsDoneCSV`)
            done = int(row.pop("step", -1))
            if 0 < done < first:
                run.log({**row, STEP_METRIC: done}, step=done)
        here = Path(run.settings.sync_dir).resolve()
        earlier = [f.name for f in offline_folders(self._run_dir / "wandb", run.id) if f.resolve() != here]
        if earlier:
            path = self._run_dir / SUPERSEDED_FILE
            known = path.read_text().split() if path.is_file() else []
            write_atomic(path, "".join(f"{name}\n" for name in dict.fromkeys(known + earlier)))

    @rank_zero_only
    def log_hyperparams(self, params: Any) -> None:
        params = dict(params) if isinstance(params, dict) else dict(vars(params))
        params.pop("config", None)  # TransformerSystem's copy of the run config, already logged flat at init
        if params:
            super().log_hyperparams(params)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        super().finalize(status)
        result = read_result(self._run_dir) or {}
        # Lightning finalizes too (end of fit, or on an exception) while result.json still says "running";
        # train() finalizes after writing result.json, with the same status.
        if self._experiment is None or result.get("status") != status:
            return
        record_result(self, result)
        with errors_only(log_path(self._run_dir)):  # its closing notes (how to sync an offline run) too
            self._experiment.finish(exit_code=0 if status == Status.FINISHED else 1)
        self._experiment = None  # a later use starts (resumes) the same run id again


def make_wandb_logger(cfg: DictConfig, run_dir: Path, *, beside_others: bool = False) -> WandbLogger:
    """The W&B logger of one run: its files go to ``<run_dir>/wandb/``.

    Args:
        cfg: a run config; ``cfg.wandb`` names the project, entity, group (default: ``cfg.name``),
            run name (default: ``cfg.name``), job type, tags and mode (:func:`resolve_mode`).
        run_dir: the run directory; its stored W&B run id (:func:`run_id`) makes a resumed run
            continue the same W&B run.
        beside_others: other runs of this process are active at the same time (a seed array's members): each
            gets a W&B run of its own (wandb's ``reinit="create_new"``) instead of the one already running.

    Returns:
        A WandbLogger whose run starts lazily, with the flattened config (:func:`flatten`) and
        summaries ``min`` of val/loss, val/ppl and ``max`` of val/acc, val/bleu, test/bleu.

    Raises:
        ConfigError: ``wandb.mode`` is not a mode.
    """
    # Absolute: wandb's service process resolves relative paths against its own working directory,
    # which is wherever the first run of this Python process started.
    w, run_dir = cfg.wandb, Path(run_dir).resolve()
    mode = resolve_mode(w.mode)
    return _RunLogger(
        run_dir=run_dir, save_dir=str(run_dir), project=w.project, entity=w.entity, group=w.group or cfg.name,
        name=w.name or cfg.name, job_type=w.job_type, tags=list(w.tags), mode=mode, config=wandb_config(cfg),
        id=run_id(cfg, run_dir) if mode != "disabled" else None, resume="allow", settings=_settings(),
        **({"reinit": "create_new"} if beside_others else {}),
    )


@rank_zero_only
def record_result(logger: WandbLogger, result: dict[str, Any]) -> None:
    """Put a run's outcome into its W&B summary.

    Args:
        logger: the run's W&B logger.
        result: ``result.json``'s contents: ``status``, ``step``, ``parameters``, ``tokens_per_s``,
            ``wall_time_s``... as they are; metrics as ``best/val/loss``, ``final/val/loss``...
    """
    logger.experiment.summary.update(outcome(result))


def outcome(result: dict[str, Any]) -> dict[str, Any]:
    """A run's outcome as its W&B summary holds it: ``status``, ``step``, ... and ``best/<metric>``,
    ``final/<metric>`` from ``result.json``'s contents."""
    summary = {k: result[k] for k in RESULT_KEYS if result.get(k) is not None}
    for part in ("best", "final"):
        summary.update({f"{part}/{k}": v for k, v in (result.get(part) or {}).items()})
    return summary


def record_scores(cfg: DictConfig, run_dir: Path, scores: dict[str, Any]) -> bool:
    """Add scores computed after training (``ablate evaluate``'s ``test/bleu``) to the run's W&B summary.

    The run's stored W&B id is resumed, so the scores land on the same run: offline, as one more
    segment under ``<run_dir>/wandb/`` that ``ablate sync`` uploads after the training segments. The segment's summary
    holds the run's outcome too (``result.json``), since an uploaded segment's summary replaces the run's.

    Returns:
        False when the run did not log to W&B (``logger: none``, mode disabled, or no stored run id).
    """
    run_dir = Path(run_dir).resolve()
    stored = run_dir / RUN_ID_FILE
    if cfg.logger != LoggerKind.wandb or not stored.is_file():
        return False
    w = cfg.wandb
    mode = resolve_mode(w.mode)
    if mode == "disabled":
        return False
    import wandb

    run = wandb.init(project=w.project, entity=w.entity, group=w.group or cfg.name, name=w.name or cfg.name,
                     job_type=w.job_type, id=stored.read_text().strip(), resume="allow", dir=str(run_dir), mode=mode,
                     settings=_settings(), reinit="create_new")
    try:
        run.summary.update({**outcome(read_result(run_dir) or {}), **scores})
    finally:
        run.finish()
    return True


def report_run_id(project: str, entity: str | None, group: str) -> str:
    """The one W&B run a sweep folder's report goes to: the same id every time ``ablate report`` runs. ``group``: the
    sweep folder's own (:func:`ablate.runs.study.sweep_group`), so that two folders of one sweep never share it."""
    digest = hashlib.sha256(f"{entity or ''}/{project}/{group}".encode()).hexdigest()[:16]
    return f"report-{digest}"


@contextlib.contextmanager
def errors_only(log: Path | None) -> Iterator[None]:
    """wandb's notes and warnings (an offline run's three lines on where its data is and how to sync it) into ``log``,
    appended, instead of on stderr, while the block runs; its errors still on stderr. None: dropped.

    wandb prints through its terminal settings, which it reads once per process (``wandb.setup``), not per run: so
    they are set for the block and set back to the process's after it.
    """
    import wandb

    process = wandb.setup().settings
    logger = logging.getLogger("ablate.wandb")
    logger.propagate, logger.level = False, logging.INFO
    handler = logging.FileHandler(log, encoding="utf-8") if log is not None else logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s wandb %(levelname)s %(message)s"))
    logger.addHandler(handler)
    wandb.termsetup(wandb.Settings(show_info=False, show_warnings=False, show_errors=True), logger)
    try:
        yield
    finally:
        wandb.termsetup(process, None)
        logger.removeHandler(handler)
        handler.close()


def log_table(*, project: str, entity: str | None, group: str, name: str, columns: list[str],
              rows: list[list[Any]], save_dir: Path, mode: str = "auto", log: Path | None = None) -> None:
    """Log a table to a sweep's report run (job type ``report``, key ``report/table``) in the sweep's group.

    The run has a fixed id (:func:`report_run_id`): each report replaces the table of the same run, instead of
    adding another run. Offline, the report's earlier folders not yet uploaded are removed first (the new table is the
    whole report), so that ``save_dir/wandb`` holds one folder of it to sync. Columns may mix numbers, text and blanks.

    Args:
        project, entity, group, name: where the run goes and what it is called.
        columns: the table's header.
        rows: one list of values per row.
        save_dir: the folder that receives ``wandb/``.
        mode: as ``wandb.mode`` (:func:`resolve_mode`).
        log: the file wandb's notes and warnings are appended to instead of stderr (:func:`errors_only`); None: they
            are dropped. Its errors go to stderr.

    Raises:
        ConfigError: ``mode`` is not a mode.
    """
    import wandb

    mode = resolve_mode(mode)
    save_dir, report = Path(save_dir).resolve(), report_run_id(project, entity, group)
    save_dir.mkdir(parents=True, exist_ok=True)
    if mode == "offline":
        for folder in offline_runs([save_dir / "wandb"]):
            if folder.name.endswith(f"-{report}"):
                shutil.rmtree(folder)
    with errors_only(log):
        run = wandb.init(project=project, entity=entity, group=group, name=name, job_type="report", id=report,
                         resume="allow", dir=str(save_dir), mode=mode, settings=_settings(), reinit="create_new")
        try:
            run.log({"report/table": wandb.Table(columns=list(columns), data=[list(r) for r in rows],
                                                 allow_mixed_types=True)})
        except BaseException:
            run.finish(exit_code=1)
            raise
        run.finish()


def sync(paths: list[Path]) -> int:
    """Upload the offline W&B runs under ``paths`` with ``wandb sync`` (segments of a resumed run in order).

    Sync needs an API key and the W&B server (``WANDB_BASE_URL``, default https://api.wandb.ai) reachable: without
    the network it fails within seconds (:data:`ablate.runs.wandb_offline.CONNECT_TIMEOUT`), in one line, uploading
    nothing.

    Args:
        paths: run directories, sweep directories, or any folders holding them.

    Returns:
        ``wandb sync``'s exit code; 1 when the server cannot be reached.

    Raises:
        ConfigError: there is nothing to sync, or no API key is configured (wandb is not called).
    """
    runs = offline_runs(paths)
    where = ", ".join(map(str, paths))
    if not runs:
        raise ConfigError("DIR", where, "a folder holding offline W&B runs not yet uploaded (nothing to sync under "
                          "it)", COMMAND_LINE)
    if not has_api_key():
        raise ConfigError("WANDB_API_KEY", None, f"a W&B API key to sync {len(runs)} offline W&B run(s) (set "
                          "WANDB_API_KEY or run `wandb login`)", "environment")
    if why := server_unreachable():
        print(f"ablate: error: network unreachable: the W&B server {why}; sync needs it and an API key to upload "
              f"{len(runs)} offline W&B run(s) (nothing was uploaded; run `ablate sync` again once online)",
              file=sys.stderr)
        return 1
    cmd = [sys.executable, "-m", "wandb", "sync", *map(str, runs)]
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False).returncode
