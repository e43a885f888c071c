"""Sweep files: the W&B sweep schema, plus ablate's ``base``, paired ``rows`` and seed replicates.

    name: table3_A
    method: grid                       # grid | random (W&B's own sampler: --backend wandb)
    metric: {name: val/loss, goal: minimize}
    base: configs/transformer_base.yaml   # or {config: ..., overrides: [key=value, ...]}
    rows:                              # paired variants: keys that change together, one row each
      - {name: base}
      - {name: "h=1", model.n_heads: 1, model.d_k: 512, model.d_v: 512}
    parameters:                        # W&B form: value | values | distribution (random only)
      model.dropout: {values: [0.0, 0.1]}
      seed: {values: [0, 1, 2]}        # replicates: the report aggregates over them
    run_cap: 20

Nested W&B parameters (``model: {parameters: {n_heads: {values: [...]}}}``) are
flattened to dotted keys.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ablate.errors import ConfigError
from ablate.sweep.match import Match

TOP_LEVEL = {"name", "description", "method", "metric", "parameters", "run_cap", "base", "rows",
             "sampler_seed", "program", "command", "early_terminate", "project", "entity", "match", "evaluate"}
EVALUATE_OPTIONS = ("lengths", "split", "beam", "alpha", "average_last", "checkpoint", "batch_tokens")
ROW_KEYS = ("name", "match")  # a row's own keys; every other key of a row is a config key
METHODS = ("grid", "random", "bayes")  # bayes needs W&B's controller: --backend wandb
DISTRIBUTIONS = {"constant", "categorical", "int_uniform", "uniform", "q_uniform", "log_uniform_values",
                 "q_log_uniform_values", "normal", "q_normal", "log_normal", "q_log_normal"}


@dataclass(frozen=True)
class Point:
    """One planned run before its config is loaded: a variant (row + sampled values) and a seed."""

    variant: str
    seed: int | None
    values: dict[str, Any]  # dotted key -> value, rows' and parameters' together (seed excluded)
    row: str = ""  # the row it comes from


@dataclass
class Sweep:
    """A parsed sweep file."""

    name: str
    path: Path
    method: str = "grid"
    metric: dict[str, str] = field(default_factory=lambda: {"name": "val/loss", "goal": "minimize"})
    base_config: Path | None = None
    base_overrides: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # each with a "name"
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)  # dotted key -> W&B spec
    run_cap: int | None = None
    sampler_seed: int = 0
    match: Match | None = None  # matched budgets for every row but the base (a row's own ``match`` wins)
    evaluate: dict[str, Any] | None = None  # ``ablate evaluate`` options, run after training (None: no evaluation)
    raw: dict[str, Any] = field(default_factory=dict)

    def evaluate_options(self) -> list[str] | None:
        """``evaluate: {lengths: [1, 2, 4], beam: 4}`` as ``ablate evaluate`` options: --lengths 1,2,4 --beam 4
        (``evaluate: true``: its defaults); None when the sweep evaluates nothing."""
        if self.evaluate is None:
            return None
        out: list[str] = []
        for name, value in self.evaluate.items():
            text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
            out += [f"--{name.replace('_', '-')}", text]
        return out

    def match_of(self, row_name: str) -> Match | None:
        """The budget a row matches: its own ``match``, else the sweep's."""
        row = next((r for r in self.rows if r["name"] == row_name), {})
        return row["match"] if "match" in row else self.match

    @property
    def seeds(self) -> list[int | None]:
        spec = self.parameters.get("seed")
        if spec is None:
            return [None]
        return list(spec["values"]) if "values" in spec else [spec["value"]]

    def points(self) -> list[Point]:
        """Every run of the sweep: grid order (rows, then parameters in file order, seeds innermost), or
        ``run_cap`` random samples, each replicated over the seeds."""
        if self.method == "bayes":
            raise ConfigError("method", "bayes", "grid or random locally (bayes: use --backend wandb)", str(self.path))
        others = {k: v for k, v in self.parameters.items() if k != "seed"}
        rows = self.rows or [{"name": ""}]
        combos = _grid(rows, others) if self.method == "grid" else _random(rows, others, self._n_random(), self.sampler_seed)
        points = [Point(_variant_name(row, sampled, others), seed, {**_row_values(row), **sampled}, row["name"])
                  for row, sampled in combos for seed in self.seeds]
        return points[: self.run_cap] if self.run_cap else points

    def _n_random(self) -> int:
        if not self.run_cap:
            raise ConfigError("run_cap", None, "a positive run_cap for method: random", str(self.path))
        return max(1, self.run_cap // len(self.seeds))


def _row_values(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ROW_KEYS}


def _short(key: str, value: Any) -> str:
    return f"{key.rsplit('.', 1)[-1]}={value}"


def _variant_name(row: dict[str, Any], sampled: dict[str, Any], others: dict[str, dict[str, Any]]) -> str:
    varied = [k for k in sampled if "value" not in others[k]]
    parts = [row["name"]] if row.get("name") else [_short(k, v) for k, v in _row_values(row).items()]
    parts += [_short(k, _fmt(sampled[k])) for k in varied]
    return ", ".join(p for p in parts if p) or "base"


def _fmt(value: Any) -> Any:
    """Floats as written (0.1), sampled ones shortened (0.1234 rather than 0.12340517...)."""
    return f"{value:.4g}" if isinstance(value, float) and len(str(value)) > 8 else value


def _grid(rows: list[dict[str, Any]], params: dict[str, dict[str, Any]]) -> list[tuple[dict, dict]]:
    combos: list[dict[str, Any]] = [{}]
    for key, spec in params.items():
        values = spec["values"] if "values" in spec else [spec["value"]]
        combos = [{**c, key: v} for c in combos for v in values]
    return [(row, c) for row in rows for c in combos]


def _random(rows, params, n: int, seed: int) -> list[tuple[dict, dict]]:
    rng = random.Random(seed)
    return [(rng.choice(rows), {k: _sample(spec, rng) for k, spec in params.items()}) for _ in range(n)]


def _sample(spec: dict[str, Any], rng: random.Random) -> Any:
    if "value" in spec:
        return spec["value"]
    if "values" in spec and spec.get("distribution", "categorical") == "categorical":
        return rng.choice(spec["values"])
    dist, lo, hi = spec.get("distribution"), spec.get("min"), spec.get("max")
    q = spec.get("q", 1)
    if dist == "int_uniform":
        return rng.randint(int(lo), int(hi))
    if dist in ("uniform", "q_uniform"):
        x = rng.uniform(lo, hi)
        return round(x / q) * q if dist == "q_uniform" else x
    if dist in ("log_uniform_values", "q_log_uniform_values"):
        x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        return round(x / q) * q if dist.startswith("q_") else x
    mu, sigma = spec.get("mu", 0.0), spec.get("sigma", 1.0)
    x = rng.gauss(mu, sigma) if "normal" in dist and "log" not in dist else math.exp(rng.gauss(mu, sigma))
    return round(x / q) * q if dist.startswith("q_") else x


def _flatten_parameters(params: dict[str, Any], prefix: str, source: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, spec in params.items():
        full = f"{prefix}{key}"
        if not isinstance(spec, dict):
            raise ConfigError(f"parameters.{full}", spec, "a mapping with value, values or a distribution", source)
        if "parameters" in spec:  # W&B nested form
            out.update(_flatten_parameters(spec["parameters"], f"{full}.", source))
        else:
            out[full] = spec
    return out


def _check_parameter(key: str, spec: dict[str, Any], method: str, source: str) -> None:
    where = f"parameters.{key}"
    if "values" in spec and (not isinstance(spec["values"], list) or not spec["values"]):
        raise ConfigError(where, spec["values"], "a non-empty list of values", source)
    dist = spec.get("distribution")
    if dist is not None and dist not in DISTRIBUTIONS:
        raise ConfigError(f"{where}.distribution", dist, f"one of {', '.join(sorted(DISTRIBUTIONS))}", source)
    if "value" not in spec and "values" not in spec and dist is None:
        raise ConfigError(where, spec, "value, values or a distribution", source)
    if method == "grid" and "value" not in spec and "values" not in spec:
        raise ConfigError(where, dist, "value or values: method grid takes no distributions", source)
    if key == "seed" and "value" not in spec and "values" not in spec:
        raise ConfigError(where, spec, "value or values (seed replicates)", source)


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
    config = base.get("config")
    return (_resolve(root, config) if config else None), [str(o) for o in overrides]


def _resolve(root: Path, path: str) -> Path:
    """A path in a sweep file is relative to the current folder if it exists there, else to the file."""
    return Path(path) if Path(path).exists() else root / path


def _yaml_value(value: Any) -> str:
    """A value as an override's right-hand side (OmegaConf parses it back as YAML)."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _parse_rows(rows: Any, source: str) -> list[dict[str, Any]]:
    if rows is None:
        return []
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError("rows", rows, "a list of mappings {name: ..., key: value, ...}", source)
    out, names = [], set()
    for i, row in enumerate(rows):
        values = _row_values(row)
        name = str(row.get("name") or ", ".join(_short(k, v) for k, v in values.items()) or "base")
        if name in names:
            raise ConfigError(f"rows[{i}].name", name, "a name no other row has", source)
        names.add(name)
        parsed = {"name": name, **values}
        if "match" in row:
            parsed["match"] = Match.parse(row["match"], f"rows[{i}].match", source)
        out.append(parsed)
    return out


def _parse_evaluate(spec: Any, source: str) -> dict[str, Any] | None:
    if spec is None or spec is False:
        return None
    if spec is True:
        return {}  # ablate evaluate's defaults
    if not isinstance(spec, dict) or not set(spec) <= set(EVALUATE_OPTIONS):
        raise ConfigError("evaluate", spec, f"a mapping of ablate evaluate options: {', '.join(EVALUATE_OPTIONS)}",
                          source)
    return dict(spec)


def load_sweep(path: str | Path) -> Sweep:
    """Parse and check a sweep file.

    Raises:
        ConfigError: an unknown key, an unsupported method, or a malformed parameter or row.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise ConfigError("sweep", source, "an existing sweep YAML file", "command line")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError("yaml", getattr(exc, "problem", str(exc)), "valid YAML", source) from None
    if not isinstance(raw, dict):
        raise ConfigError("<root>", type(raw).__name__, "a mapping", source)
    for key in raw:
        if key not in TOP_LEVEL:
            raise ConfigError(str(key), raw[key], f"a sweep key: {', '.join(sorted(TOP_LEVEL))}", source)
    method = raw.get("method", "grid")
    if method not in METHODS:
        raise ConfigError("method", method, f"one of {', '.join(METHODS)}", source)
    params = _flatten_parameters(raw.get("parameters") or {}, "", source)
    for key, spec in params.items():
        _check_parameter(key, spec, method, source)
    metric = {"name": "val/loss", "goal": "minimize", **(raw.get("metric") or {})}
    if metric["goal"] not in ("minimize", "maximize"):
        raise ConfigError("metric.goal", metric["goal"], "minimize or maximize", source)
    run_cap = raw.get("run_cap")
    if run_cap is not None and (not isinstance(run_cap, int) or run_cap <= 0):
        raise ConfigError("run_cap", run_cap, "a positive integer", source)
    base_config, base_overrides = _parse_base(raw.get("base"), path.parent, source)
    return Sweep(name=str(raw.get("name") or path.stem), path=path, method=method, metric=metric,
                 base_config=base_config, base_overrides=base_overrides, rows=_parse_rows(raw.get("rows"), source),
                 parameters=params, run_cap=run_cap, sampler_seed=int(raw.get("sampler_seed", 0)),
                 match=Match.parse(raw.get("match"), "match", source),
                 evaluate=_parse_evaluate(raw.get("evaluate"), source), raw=raw)
