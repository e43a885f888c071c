"""The run matrix of a sweep: every run's validated config, identity, varied values and size.

A run's identity is the hash of its resolved config (``output_dir`` and ``wandb``
excluded), so relaunching a sweep finds the runs it already has, and two sweeps
that plan the same config share nothing by accident: each keeps its own folder.

    <sweep_dir>/sweep.yaml        the sweep file as launched
    <sweep_dir>/plan.json         the run matrix (read by ``ablate report``)
    <sweep_dir>/runs/<id>/        one run directory each (see ablate.runs.files)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from omegaconf import DictConfig, OmegaConf, read_write
from torch import nn

from ablate.config import load_config
from ablate.config.load import INTERNAL
from ablate.config.reads import effective
from ablate.config.schema import Logger
from ablate.errors import COMMAND_LINE, ConfigError
from ablate.model import count_parameters
from ablate.model.diff import module_changes
from ablate.model.flops import count_flops
from ablate.model.meta import build_on_meta
from ablate.runs.files import config_hash
from ablate.runs import sweep_folder
from ablate.runs.plan import PlanRecord, plan_path, read_plan, write_plan_record
from ablate.runs.study import sweep_group, tag
from ablate.stats.factorial import ROW, Factorial, factors_of
from ablate.sweep.match import Match, budget_of, solve
from ablate.sweep.spec import Point, Sweep, _yaml_value



@dataclass
class PlannedRun:
    id: str
    variant: str
    seed: int
    varied: dict[str, Any]
    overrides: list[str]  # the run's own values (rows, parameters, a matched dimension, seed)
    labels: list[str]  # ablate's bookkeeping: the W&B run name and tags
    run_dir: str  # relative to the sweep directory
    parameters: int
    flops_per_token: float
    changes: list[str] = field(default_factory=list)  # what the built run changes against the base variant
    same_as: str | None = None  # an earlier variant that trains the very same model (same effective config)
    matched: dict[str, Any] | None = None  # the matched budget: budget, by, value, achieved, target
    leaks_labels: bool = False  # its decoder mask scores positions that can see their labels
    search: dict[str, Any] | None = None  # a bayes sweep's point: its trial number and quantiles
    fresh_seed: bool = False  # a repeated random or bayes draw, run with a seed its variant had not used
    factors: dict[str, Any] = field(default_factory=dict)  # its level of each factor (grid sweeps): row, ladder, ...


def default_sweep_dir(sweep: Sweep) -> Path:
    return sweep_folder.default_sweep_dir(sweep.name)


def _overrides(point: Point) -> list[str]:
    out = [f"{k}={_yaml_value(v)}" for k, v in point.values.items()]
    return out + ([f"seed={point.seed}"] if point.seed is not None else [])


def run_config(sweep: Sweep, overrides: list[str], run_dir: Path | None, extra: list[str] = (),
               labels: list[str] = ()) -> DictConfig:
    """The validated config of one run: base file, base overrides, CLI extras, then the run's own values, then
    ablate's bookkeeping (W&B group, name, tags and study; the run directory). ``run_dir``: the run's folder in its
    sweep's, ``<sweep_dir>/runs/<id>``; a run that logs to W&B is in the sweep folder's group (:func:`sweep_group`),
    otherwise in the sweep's name."""
    tail = [f"wandb.group={_yaml_value(sweep.name)}", *labels] + ([f"output_dir={run_dir}"] if run_dir else [])
    tail += [f"wandb.{k}={_yaml_value(v)}" for k, v in (("project", sweep.project), ("entity", sweep.entity)) if v]
    source = str(sweep.path)
    layers = [(source, sweep.base_overrides), (COMMAND_LINE, extra), (source, overrides), (INTERNAL, tail)]
    try:
        cfg = load_config(sweep.base_config, layers=layers, source=source, layer_imports=[(source, sweep.imports)])
    except ConfigError as err:
        raise err.at(source) from None
    if run_dir is not None and cfg.logger == Logger.wandb:
        with read_write(cfg):
            cfg.wandb.group = sweep_group(Path(run_dir).parent.parent, sweep.name)
    return cfg


def plan_sweep(sweep: Sweep, sweep_dir: Path, extra: list[str] = ()) -> list[PlannedRun]:
    """Expand and validate every run of a grid or random sweep before any starts (see :class:`Planner`).

    Raises:
        ConfigError: the first run whose config is invalid (naming the key and the sweep file), or a
            matched budget that cannot be met.
    """
    return Planner(sweep, extra).plan(sweep.points())


class Planner:
    """Turns a sweep's points into validated runs: their configs, matched budgets, what each variant changes
    against the base. Points may come all at once (grid, random) or a few at a time (bayes)."""

    def __init__(self, sweep: Sweep, extra: list[str] = (), *, check: bool = False):
        """``check``: also put each variant's settings to what would refuse them only once its run starts
        (:func:`ablate.train.preflight.check_config`: Lightning's Trainer, the schedule, W&B's credentials), as a
        launch does before it writes the sweep's folder; a dry run leaves them (importing Lightning takes seconds)."""
        self.sweep, self.extra, self.check = sweep, list(extra), check
        self.base_row, base_point = _base_point(sweep)
        self.base = run_config(sweep, _overrides(base_point), None, self.extra)
        self.base_model = build_on_meta(self.base)
        if sweep.evaluate is not None:
            _check_evaluable(sweep, self.base)
        self.solved: dict[str, tuple[int, float]] = {}
        self.variants: dict[str, Variant] = {}
        self.seen: set[str] = set()
        self.used_seeds: dict[str, set[int]] = {}  # variant -> the seeds its runs train with
        self.varied = _varied_keys(sweep)

    def plan(self, points: Iterable[Point]) -> list[PlannedRun]:
        """The runs of ``points``, each validated (see :meth:`runs`)."""
        return list(self.runs(points))

    def runs(self, points: Iterable[Point]) -> Iterator[PlannedRun]:
        """The runs of ``points``, each validated as it is reached. A point whose config equals an earlier
        one's is a grid's repeated value (dropped, as W&B's grid hashes its points), or a random or bayes
        sweep's repeated draw: W&B runs every draw, so it runs, with the next seed its variant has not used."""
        for point in points:
            cfg, overrides, labels, matched = self._configure(point)
            run_id, fresh = config_hash(cfg), False
            while run_id in self.seen and not self.sweep.search.factorial:
                point, fresh = replace(point, seed=max(self.used_seeds[point.variant]) + 1), True
                cfg, overrides, labels, matched = self._configure(point)
                run_id = config_hash(cfg)
            if run_id in self.seen:
                continue
            self.seen.add(run_id)
            self.used_seeds.setdefault(point.variant, set()).add(int(cfg.seed))
            if point.variant not in self.variants:
                if self.check:
                    self._check(cfg, point.variant)
                self.variants[point.variant] = Variant.of(cfg, self.base, self.base_model, self.variants)
            v = self.variants[point.variant]
            yield PlannedRun(id=run_id, variant=point.variant, seed=cfg.seed,
                             varied=_plain({k: OmegaConf.select(cfg, k) for k in self.varied}),
                             overrides=overrides, labels=labels, run_dir=f"runs/{run_id}", parameters=v.parameters,
                             flops_per_token=v.flops, changes=v.changes, same_as=v.same_as, matched=matched,
                             leaks_labels=v.leaks_labels, fresh_seed=fresh,
                             factors=_plain(point.factors) if self.sweep.search.factorial else {})

    def _check(self, cfg: DictConfig, variant: str) -> None:
        from ablate.train.preflight import check_config

        try:
            check_config(cfg)
        except ConfigError as err:
            raise err.at(f"{self.sweep.path}, run {variant!r}") from None

    def stratum_base(self, point: Point) -> DictConfig:
        """The base row's config at a point's ladder step and sampled values: what its budget is matched to."""
        if not point.step and not point.sampled:
            return self.base
        row = next(r for r in self.sweep.rows or [{"name": ""}] if r["name"] == self.base_row)
        step = next((s for s in self.sweep.ladder if s["name"] == point.step), None)
        return run_config(self.sweep, _overrides(self.sweep.point(row, point.sampled, None, step)), None, self.extra)

    def _configure(self, point: Point) -> tuple[DictConfig, list[str], list[str], dict[str, Any] | None]:
        """A point's validated config, its own overrides, its W&B labels and its matched budget."""
        sweep, overrides, matched = self.sweep, _overrides(point), None
        match = sweep.match_of(point.row) if point.row != self.base_row else None
        if match is not None:
            matched = _solve(sweep, match, point, self.stratum_base(point), self.extra, self.solved)
            overrides.append(f"{match.by}={matched['value']}")
        changed = [tag(k, v) for k, v in point.values.items() if OmegaConf.select(self.base, k) != v]
        label = point.variant + (f", seed={point.seed}" if point.seed is not None else "")
        study = {**_plain(point.factors), ROW: point.row, "variant": point.variant, "seed": point.seed}
        labels = [f"wandb.name={_yaml_value(label)}", f"wandb.tags={_yaml_value(changed)}",
                  f"wandb.study={_yaml_value(study)}"]
        return run_config(sweep, overrides, None, self.extra, labels), overrides, labels, matched


def _base_point(sweep: Sweep) -> tuple[str, Point]:
    """The base row's name (a row named ``base``, else the first) and its point without a seed."""
    rows = sweep.rows or [{"name": ""}]
    name = "base" if any(r["name"] == "base" for r in rows) else rows[0]["name"]
    return name, sweep.point(next(r for r in rows if r["name"] == name), {}, None)


_BASE_CONFIGS: dict[str, dict[str, Any] | None] = {}  # base_config's, by what makes it: a plan is saved at every look


def base_config(sweep: Sweep) -> dict[str, Any] | None:
    """The base row's resolved config, without the command line's overrides (a relaunch repeats those: the sweep
    folder's owner checks them), as plan.json records it: what a relaunch compares its own with to name the keys that
    changed its runs' identities (a base override, the base config file, ``imports``). None when it does not load
    without the command line's overrides."""
    _, point = _base_point(sweep)
    key = json.dumps([str(sweep.path), str(sweep.base_config), sweep.base_overrides, sweep.imports, point.values],
                     sort_keys=True,
                     default=str)
    if key not in _BASE_CONFIGS:
        try:
            cfg = run_config(sweep, _overrides(point), None)
            _BASE_CONFIGS[key] = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
        except ConfigError:
            _BASE_CONFIGS[key] = None
    return _BASE_CONFIGS[key]


def _check_evaluable(sweep: Sweep, cfg: DictConfig) -> None:
    """``evaluate:`` needs a task with text (a tokenizer), and options for the base's kind of run: on a generated
    task, or with an option ``ablate evaluate`` refuses for that kind (``beam`` for a language model), every run would
    fail its evaluation after training.

    Raises:
        ConfigError: the base run's task has none, or an option is for the other kind of run.
    """
    from ablate.data import build_task  # its data module, unset up (no tokenizer trained): Lightning, not the data
    from ablate.evaluate.cli import KINDS, kind_of

    if not hasattr(type(build_task(cfg)), "tokenizer"):
        raise ConfigError("evaluate", sweep.evaluate, f"no evaluate: for task {cfg.data.task!r}, which has no text to "
                          "read or write (ablate evaluate scores parallel_text and text_lm runs)", str(sweep.path))
    arch = cfg.model.arch.value
    for name, value in (sweep.evaluate or {}).items():
        if (kind := kind_of("evaluate", name)) not in (None, arch):
            raise ConfigError(f"evaluate.{name}", value, f"nothing for these runs: {name} is for {KINDS[kind]}, and "
                              f"the base is one of {KINDS[arch]}", str(sweep.path))


def _solve(sweep: Sweep, match: Match, point: Point, base: DictConfig, extra: list[str],
           solved: dict[str, tuple[int, float]]) -> dict[str, Any]:
    """The value of ``match.by`` that gives this point's row the base's budget (once per row and sampled values)."""
    source = str(sweep.path)
    if match.by in point.values and not any(match.by in step for step in sweep.ladder):  # a ladder's size may be
        # the starting point of the re-solved key; a row's or a searched parameter's own value may not
        raise ConfigError("match", match.by, f"a key row {point.row!r} does not set itself: it sets {match.by}, "
                          "so it cannot be re-solved to match (match: none for this row, or another `by`)", source)
    key = json.dumps({"row": point.row, "step": point.step, **point.values}, sort_keys=True, default=str)
    target = budget_of(base, match.budget)
    if key not in solved:
        own = run_config(sweep, _overrides(point), None, extra)
        solved[key] = solve(match, target,
                            lambda v: run_config(sweep, [*_overrides(point), f"{match.by}={v}"], None, extra),
                            int(OmegaConf.select(own, match.by) or 1), row=point.row, source=source)
    value, achieved = solved[key]
    return {"budget": match.budget, "by": match.by, "value": value, "achieved": achieved, "target": target,
            "error": (achieved - target) / target}


@dataclass
class Variant:
    """What a variant's built model is, against the base's: size, FLOPs, changed modules, twins."""

    parameters: int
    flops: float
    changes: list[str]
    same_as: str | None
    leaks_labels: bool
    effective: str

    @classmethod
    def of(cls, cfg: DictConfig, base: DictConfig, base_model: nn.Module, earlier: dict[str, Variant]) -> Variant:
        model = build_on_meta(cfg)
        n = count_parameters(model)["total"]
        changes = module_changes(base_model, model)
        eff, base_eff = effective(cfg), effective(base)
        changes += [f"{k}: {_short(base_eff.get(k, '(not read)'))} -> {_short(v)}" for k, v in eff.items()
                    if not k.startswith(("model.", "seed")) and base_eff.get(k) != v]
        eff.pop("seed", None)
        digest = json.dumps(eff, sort_keys=True, default=str)
        twin = next((name for name, v in earlier.items() if v.effective == digest), None)
        return cls(n, count_flops(model, cfg), changes, twin, bool(model.mask.leaks_labels), digest)


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k, v in values.items()}


def _varied_keys(sweep: Sweep) -> list[str]:
    """The keys whose values differ between runs: rows' keys that differ between rows, the ladder's that differ
    between its steps, searched parameters that are not constant, and the keys matched budgets re-solve."""
    keys: list[str] = []
    for rows in (sweep.rows, sweep.ladder):
        own = list(dict.fromkeys(k for row in rows for k in row if k not in ("name", "match")))
        keys += [k for k in own if len({repr(r.get(k)) for r in rows}) > 1 and k not in keys]
    keys += [k for k, p in sweep.searched.items() if not p.constant and k not in keys and k != "seed"]
    matched = [m.by for m in [sweep.match, *(r.get("match") for r in sweep.rows)] if m is not None]
    return keys + [k for k in dict.fromkeys(matched) if k not in keys]


def base_variant(runs: list[PlannedRun]) -> str:
    """The row deltas are measured from: a variant named ``base``, else the first."""
    names = [r.variant for r in runs]
    return "base" if "base" in names else (names[0] if names else "")


def read_earlier(sweep_dir: Path) -> PlanRecord | None:
    """The plan an earlier launch wrote in ``sweep_dir`` (None for a new sweep), read once by a launch
    (:func:`ablate.runs.plan.read_plan`; only its runs are required) and passed down to what asks about it."""
    return read_plan(sweep_dir, complete=False)


def planned_of(record: PlanRecord | None, sweep_dir: Path) -> list[PlannedRun]:
    """The runs of a plan (a bayes sweep's plan grows across launches); [] without one (``record`` None)."""
    names = {f.name for f in fields(PlannedRun)}
    try:
        return [PlannedRun(**{k: v for k, v in run.items() if k in names}) for run in (record.runs if record else ())]
    except (TypeError, AttributeError):
        raise ConfigError("file", str(plan_path(sweep_dir)), "a sweep's plan whose runs are as ablate writes them") \
            from None


def read_planned(sweep_dir: Path) -> list[PlannedRun]:
    """The runs of an existing plan.json, read now (a W&B agent's, whose plan other agents grow); [] when there is
    none."""
    return planned_of(read_earlier(sweep_dir), sweep_dir)


def plan_record(sweep: Sweep, runs: list[PlannedRun]) -> dict[str, Any]:
    """The plan as plan.json holds it: the sweep's identity, metric and design, and every planned run."""
    return plan_of(sweep, runs).to_json()


def plan_of(sweep: Sweep, runs: list[PlannedRun]) -> PlanRecord:
    """The plan.json record of ``runs`` planned for ``sweep`` (:class:`ablate.runs.plan.PlanRecord`)."""
    factors = factor_record(sweep)
    family = factorial_of(runs, factors).family()  # the contrasts judged: part of the design
    return PlanRecord(
        name=sweep.name, description=sweep.description, method=sweep.method, metric=sweep.metric,
        base_variant=base_variant(runs), varied_keys=tuple(runs[0].varied) if runs else (), factors=tuple(factors),
        design={**sweep.design(len(family)).to_json(), "family": [c.label for c in family]},
        judged=tuple(j.to_json() for j in sweep.judged), base_config=base_config(sweep),
        runs=tuple(asdict(r) for r in runs))


def factor_record(sweep: Sweep) -> list[dict[str, Any]]:
    """The factors of a grid sweep and their levels, as plan.json holds them; [] for random and bayes sweeps (their
    points cross no grid: every variant is compared with the base)."""
    if not sweep.search.factorial:
        return []
    return [{"name": name, "levels": _plain({"levels": levels})["levels"]} for name, levels in
            sweep.factor_levels().items()]


def factorial_of(runs: list[PlannedRun], factors: list[dict[str, Any]]) -> Factorial:
    """The cells and contrasts of planned runs (:class:`ablate.stats.factorial.Factorial`)."""
    return Factorial(factors_of(factors), {r.variant: r.factors for r in runs}, base_variant(runs),
                     frozenset(r.variant for r in runs if r.leaks_labels), {r.variant: r.parameters for r in runs})


def write_plan(sweep: Sweep, sweep_dir: Path, runs: list[PlannedRun]) -> None:
    """Write plan.json (atomically)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    write_plan_record(sweep_dir, plan_of(sweep, runs))
