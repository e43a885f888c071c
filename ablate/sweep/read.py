"""Reading a sweep file (:func:`load_sweep`): every key checked as W&B's schema checks it, ablate's own keys
parsed, one line naming the key, the value and what is allowed for anything else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.paths import find_file
from ablate.errors import COMMAND_LINE, ConfigError, check_name
from ablate.runs.metrics import EVALUATED, allowed, default_metric, known
from ablate.stats.design import GOALS
from ablate.sweep.slurm_settings import SlurmSettings
from ablate.sweep.decide import parse_decide
from ablate.sweep.hyperband import Hyperband
from ablate.sweep.match import Match
from ablate.sweep.methods import DEFAULT_METHOD, SearchMethod, method_named
from ablate.sweep.params import Param, flatten
from ablate.sweep.spec import DEFAULT_VARIANT, Sweep, _row_values, _short, _yaml_value
from ablate.yamlio import load_yaml_file

ABLATE_KEYS = {"base", "rows", "ladder", "sampler_seed", "match", "evaluate", "decide", "slurm", "imports"}
W_AND_B_KEYS = {"name", "description", "method", "metric", "parameters", "run_cap", "early_terminate", "project",
                "entity", "controller", "program", "command", "job", "image_uri", "scheduler", "apiVersion", "kind",
                "metrics"}
# ablate runs `ablate train` itself; apiVersion and kind head W&B Launch's sweep-scheduler manifests
NOT_HONOURED = ("program", "command", "job", "image_uri", "scheduler", "metrics", "apiVersion", "kind")
EVALUATE_OPTIONS = ("lengths", "split", "beam", "alpha", "average_last", "checkpoint", "batch_tokens")
IMPUTE = ("worst", "best", "latest")  # what a bayes search scores a failed run by (W&B's metric.impute)


def _check_method(method: SearchMethod, params: dict[str, Param], source: str) -> None:
    for key, p in params.items():
        if key == "seed" and not _integers(p):
            raise ConfigError("parameters.seed", p.distribution, "value, values, or a distribution of integers "
                              "(int_uniform, or a q_ form with a whole q): a seed is an integer", source)
        method.check_parameter(key, p, source)


def _integers(p: Param) -> bool:
    if p.distribution in ("constant", "categorical", "categorical_w_probabilities"):
        values = [p.settings["value"]] if p.constant else p.settings["values"]
        return all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    q = p.settings.get("q")
    return p.distribution == "int_uniform" or (p.distribution.startswith("q_") and float(q).is_integer())


def _parse_base(base: Any, root: Path, source: str) -> tuple[Path | None, list[str]]:
    if base is None:
        return None, []
    if isinstance(base, str):
        base = {"config": base}
    if not isinstance(base, dict) or set(base) - {"config", "overrides"}:
        raise ConfigError("base", base, "a config path, or {config: PATH, overrides: [key=value, ...]}", source)
    overrides = base.get("overrides") or []
    if isinstance(overrides, dict):
        overrides = [f"{k}={_yaml_value(v)}" for k, v in overrides.items()]
    if not isinstance(overrides, list):
        raise ConfigError("base.overrides", overrides, "a list of key=value strings, or a mapping of keys to values",
                          source)
    config = base.get("config")
    if config is not None and not isinstance(config, str):
        raise ConfigError("base.config", config, "a config path (e.g. configs/default.yaml)", source)
    found = find_file(config, root, key="base.config", source=source) if config else None
    return found, [str(o) for o in overrides]


def _parse_imports(spec: Any, source: str) -> list[str]:
    """``imports: [my_parts, ...]``: modules every run imports (they register components), found beside the file."""
    modules = [spec] if isinstance(spec, str) else spec
    if modules is None:
        return []
    if not isinstance(modules, list) or not all(isinstance(m, str) and m for m in modules):
        raise ConfigError("imports", spec, "a module name, or a list of them (imports: [my_parts])", source)
    return list(modules)


def _parse_rows(rows: Any, source: str, key: str = "rows") -> list[dict[str, Any]]:
    """``rows`` (or the ``ladder``'s steps): a list of {name, config keys...}, names unique."""
    if rows is None:
        return []
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(key, rows, "a list of mappings {name: ..., key: value, ...}", source)
    if not rows:  # written, yet empty: a list left to fill in, not "no rows"
        raise ConfigError(key, rows, "at least one row (rows: [{name: base}, {name: ..., key: value}]), or no rows: "
                          "key, which runs the base config alone" if key == "rows" else
                          f"at least two steps ({key}: [{{name: S, key: value}}, {{name: L, key: value}}]), or no "
                          f"{key}: key", source)
    out, names = [], set()
    for i, row in enumerate(rows):
        values = _row_values(row)
        name = str(row.get("name") or ", ".join(_short(k, v) for k, v in values.items()) or DEFAULT_VARIANT)
        if name in names:
            raise ConfigError(f"{key}[{i}].name", name, "a name no other row has", source)
        names.add(name)
        parsed = {"name": name, **values}
        if "match" in row:
            if key != "rows":
                raise ConfigError(f"{key}[{i}].match", row["match"], "no match in a ladder step: rows (or the sweep) "
                                  "match their budgets to the base row's at each step", source)
            parsed["match"] = Match.parse(row["match"], f"rows[{i}].match", source)
        out.append(parsed)
    return out


def _check_rows_apart(rows: list[dict[str, Any]], params: dict[str, Param], source: str) -> None:
    """No row sets a key the parameters sweep: the parameter's values would be run under the row's label.

    Raises:
        ConfigError: naming the row's key and the parameter.
    """
    for i, row in enumerate(rows):
        for key in row:
            if key in params:
                raise ConfigError(f"rows[{i}].{key}", row[key], f"a key that no parameter sweeps (parameters.{key} "
                                  f"sweeps it too, and its values would run under the row named {row['name']!r}): set "
                                  "it in the row or sweep it, not both", source)


def _parse_ladder(spec: Any, method: SearchMethod, rows: list[dict[str, Any]], params: dict[str, Param],
                  source: str) -> list[dict[str, Any]]:
    """``ladder``: the sizes every row runs at; a grid's, at least two steps, keys that no row or parameter sets."""
    ladder = _parse_rows(spec, source, "ladder")
    if not ladder:
        return []
    if not method.factorial:
        raise ConfigError("ladder", [s["name"] for s in ladder], "no ladder for method "
                          f"{method.name}: every row runs at every step of a grid", source)
    if len(ladder) < 2:
        raise ConfigError("ladder", [s["name"] for s in ladder], "at least two steps (sizes) to compare", source)
    for i, step in enumerate(ladder):
        for key in _row_values(step):
            if key in params or any(key in row for row in rows):
                raise ConfigError(f"ladder[{i}].{key}", step[key], "a key that no row and no parameter sets: the "
                                  "ladder's sizes and the rows' changes must not overwrite each other", source)
    return ladder


def _parse_evaluate(spec: Any, source: str) -> dict[str, Any] | None:
    if spec is None or spec is False:
        return None
    if spec is True:
        return {}  # ablate evaluate's defaults
    if not isinstance(spec, dict) or not set(spec) <= set(EVALUATE_OPTIONS):
        raise ConfigError("evaluate", spec, f"a mapping of ablate evaluate options: {', '.join(EVALUATE_OPTIONS)}",
                          source)
    return dict(spec)


def _parse_metric(spec: Any, source: str) -> dict[str, Any]:
    metric = default_metric()
    if spec is not None:
        if not isinstance(spec, dict) or set(spec) - {"name", "goal", "target", "impute", "impute_while_running"}:
            raise ConfigError("metric", spec, "{name: ..., goal: minimize|maximize, target: number, impute: "
                              "worst|best|latest, impute_while_running: false|worst|best|latest}", source)
        metric.update(spec)
    if metric["goal"] not in GOALS:
        raise ConfigError("metric.goal", metric["goal"], " or ".join(GOALS), source)
    if metric.setdefault("impute", "worst") not in IMPUTE:
        raise ConfigError("metric.impute", metric["impute"], f"one of {', '.join(IMPUTE)}", source)
    if metric.get("impute_while_running") is False:  # W&B's schema takes the string "false"; YAML's false means it too
        metric["impute_while_running"] = "false"
    if metric.setdefault("impute_while_running", "false") not in (*IMPUTE, "false"):
        raise ConfigError("metric.impute_while_running", metric["impute_while_running"],
                          f"one of {', '.join(IMPUTE)}, false", source)
    if not isinstance(metric["name"], str) or not known(metric["name"]):
        raise ConfigError("metric.name", metric["name"], allowed(str(metric["name"])), source)
    target = metric.get("target")
    if target is not None and (isinstance(target, bool) or not isinstance(target, (int, float))):
        raise ConfigError("metric.target", target, "a number", source)
    return metric


def _check_controller(spec: Any, source: str) -> None:
    if spec is not None and (not isinstance(spec, dict) or spec.get("type") not in ("local", "cloud")):
        raise ConfigError("controller", spec, "{type: local} or {type: cloud}", source)


def check_sequential(sweep: Sweep, key: str = "decide.max_seeds") -> None:
    """A sequential design needs a grid over listed seeds, fewer than ``max_seeds`` of them, and no early stops.

    Raises:
        ConfigError: naming the key that stands in the way.
    """
    n = sweep.decide.max_seeds
    if n is None:
        return
    source = str(sweep.path)
    if not sweep.search.factorial:
        raise ConfigError(key, n, "no max_seeds for method " f"{sweep.method}: seeds are added to the rows of a grid",
                          source)
    if sweep.early_terminate is not None:
        raise ConfigError(key, n, "no max_seeds with early_terminate: a run stopped early is no outcome to judge",
                          source)
    seeds = sweep.seeds
    if seeds == [None] or not all(isinstance(s, int) for s in seeds):
        raise ConfigError(key, n, "a listed seed parameter (parameters.seed: {values: [0, 1, 2]}): the seeds "
                          "every row starts with", source)
    if n < len(seeds):
        raise ConfigError(key, n, f"at least the {len(seeds)} seeds every row starts with", source)


TO_WRITE = ("base: CONFIG (the config every run starts from, e.g. base: configs/default.yaml), then rows: or "
            "parameters: (docs/sweeps.md)")


def check_runnable(sweep: Sweep) -> None:
    """A sweep file that says what to run: not empty, not only keys ablate ignores (a W&B agent's ``program`` and
    ``command``), and with a ``base``. Without one every run would train the schema's defaults, the paper's base
    model (6+6 layers, d_model 512) for 100,000 steps: a plain W&B sweep file, not a choice (as for an empty config:
    :func:`ablate.entry.refuse_if_empty`).

    Raises:
        ConfigError: naming the file or the key, and what to write.
    """
    raw, source = sweep.raw, str(sweep.path)
    if not raw:
        raise ConfigError("SWEEP", source, f"a sweep file that sets something (this one is empty): {TO_WRITE}",
                          COMMAND_LINE)
    if set(raw) <= set(NOT_HONOURED):
        first = next(iter(raw))
        raise ConfigError(first, raw[first], f"a key ablate reads: {', '.join(raw)} are for W&B's agents, which "
                          f"ablate does not use (it runs ablate train itself), and the file sets nothing else; write "
                          f"{TO_WRITE}", source)
    if not raw.get("base"):
        raise ConfigError("base", raw.get("base"), "the config every run starts from, e.g. base: configs/default.yaml: "
                          "without it every run would train the schema's defaults, the paper's base model (6+6 layers, "
                          "d_model 512) for 100,000 steps; to mean that, write base: configs/transformer_base.yaml",
                          source)


def check_overrides(sweep: Sweep, extra: list[str]) -> None:
    """The command line's overrides read with the sweep as a whole: one that the sweep sets again in every run (a
    parameter, the seed it lists, every row or every ladder step) would change no run while labelling the sweep as if
    it had; an override of a key only some rows set changes the others (the base among them), and is allowed.

    Raises:
        ConfigError: naming the override and the part of the sweep that overwrites it.
    """
    for item in extra:
        key, _, value = item.partition("=")
        if key in sweep.parameters:
            where = f"parameters.{key}"
        elif sweep.rows and all(key in _row_values(r) for r in sweep.rows):
            where = f"every row ({', '.join(r['name'] for r in sweep.rows)})"
        elif sweep.ladder and all(key in _row_values(s) for s in sweep.ladder):
            where = "every ladder step"
        else:
            continue
        raise ConfigError(key, value, f"a key the sweep does not set in every run ({where} in {sweep.path} sets it, "
                          "so this override would change no run): change it in the sweep file", COMMAND_LINE)


def load_sweep(path: str | Path) -> Sweep:
    """Parse and check a sweep file.

    Raises:
        ConfigError: an unknown key, an unsupported method, or a malformed parameter or row.
    """
    path = find_file(path, Path.cwd(), key="SWEEP", source=COMMAND_LINE, what="an existing sweep YAML file")
    source = str(path)
    raw = load_yaml_file(path, key="SWEEP", source=COMMAND_LINE) or {}
    if not isinstance(raw, dict):
        raise ConfigError("<root>", type(raw).__name__, "a mapping", source)
    for key in raw:
        if key not in W_AND_B_KEYS | ABLATE_KEYS:
            raise ConfigError(str(key), raw[key], f"a sweep key: {', '.join(sorted(W_AND_B_KEYS | ABLATE_KEYS))}",
                              source)
    method = method_named(raw.get("method", DEFAULT_METHOD), source)
    params = flatten(raw.get("parameters") or {}, source)
    _check_method(method, params, source)
    _check_controller(raw.get("controller"), source)
    run_cap = raw.get("run_cap")
    if run_cap is not None and (isinstance(run_cap, bool) or not isinstance(run_cap, int) or run_cap <= 0):
        raise ConfigError("run_cap", run_cap, "a positive integer", source)
    base_config, base_overrides = _parse_base(raw.get("base"), path.parent, source)
    rows = _parse_rows(raw.get("rows"), source)
    _check_rows_apart(rows, params, source)
    sweep = Sweep(name=check_name(str(raw.get("name") or path.stem), "name", source), path=path, method=method.name,
                  metric=_parse_metric(raw.get("metric"), source), description=str(raw.get("description") or ""),
                  base_config=base_config, base_overrides=base_overrides, rows=rows,
                  ladder=_parse_ladder(raw.get("ladder"), method, rows, params, source), parameters=params,
                  run_cap=run_cap, sampler_seed=int(raw.get("sampler_seed", 0)),
                  match=Match.parse(raw.get("match"), "match", source),
                  evaluate=_parse_evaluate(raw.get("evaluate"), source),
                  early_terminate=Hyperband.parse(raw.get("early_terminate"), source),
                  project=raw.get("project"), entity=raw.get("entity"),
                  decide=parse_decide(raw.get("decide"), source),
                  slurm=SlurmSettings.parse(raw.get("slurm"), source),
                  imports=_parse_imports(raw.get("imports"), source),
                  ignored=[k for k in NOT_HONOURED if k in raw], raw=raw)
    check_sequential(sweep)
    check_judged(sweep)
    return sweep


def check_judged(sweep: Sweep) -> None:
    """``decide.metrics`` lists the sweep's metric (W&B's, which its engine, a target and hyperband read) with its
    goal, and a metric only ``ablate evaluate`` writes (test/bleu) only with the sweep's ``evaluate:``.

    Raises:
        ConfigError: naming the metric's key.
    """
    source, metric = str(sweep.path), sweep.metric
    listed = sweep.decide.metrics
    if len(listed) > 1 and sweep.early_terminate is not None:
        raise ConfigError("decide.metrics", [j.name for j in listed], "one metric with early_terminate: a run "
                          "stopped early is compared at a step of its curve, which only the sweep's metric has",
                          source)
    if listed and not any(j.name == metric["name"] for j in listed):
        raise ConfigError("decide.metrics", [j.name for j in listed], f"a list with the sweep's metric "
                          f"({metric['name']}, metric.name) among them", source)
    for i, j in enumerate(listed):
        if j.name == metric["name"] and j.goal != metric["goal"]:
            raise ConfigError(f"decide.metrics[{i}].goal", j.goal, f"{metric['goal']}, as metric.goal says", source)
        if EVALUATED.match(j.name) and sweep.evaluate is None:
            raise ConfigError(f"decide.metrics[{i}].name", j.name, "a metric training logs, or add the sweep's "
                              f"evaluate: (e.g. {{average_last: 5, beam: 4}}): {j.name} is written by ablate evaluate "
                              "after training", source)
