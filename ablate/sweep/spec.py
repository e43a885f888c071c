"""Sweep files: W&B's sweep configuration, read as W&B reads it, plus ablate's ``base``, ``rows`` and seeds.

    name: table3_A
    description: Table 3 rows (A) on Multi30k
    method: grid                       # grid | random | bayes (locally: Optuna's Gaussian process)
    metric: {name: val/loss, goal: minimize, target: 1.5}   # target: no new run once one reaches it
    early_terminate: {type: hyperband, min_iter: 2, eta: 2}  # W&B's rule, applied by the local pool
    project: ablate                    # the W&B project (and entity) of every run
    base: configs/transformer_base.yaml   # or {config: ..., overrides: [...]}: beside this file, else ablate's own
    imports: [my_parts]                # modules every run imports (they register components), beside this file
    rows:                              # paired variants: keys that change together, one row each
      - {name: base}
      - {name: "h=1", model.n_heads: 1, model.d_k: 512, model.d_v: 512}
    ladder:                            # sizes every row runs at (grid): is a row's Δ the same at every size?
      - {name: 1M, model.d_model: 64, model.n_layers: 2}
      - {name: 4M, model.d_model: 128, model.n_layers: 4}
    parameters:                        # every W&B form: value | values | min/max | distributions
      model.dropout: {values: [0.0, 0.1]}
      seed: {values: [0, 1, 2]}        # replicates: each point runs once per seed; the report aggregates them
    run_cap: 20
    match: params                      # matched budgets (ablate.sweep.match)
    evaluate: {lengths: [1, 2, 4]}     # ablate evaluate after training
    decide: {margin: 0.05, max_seeds: 10}  # equivalence margin; seeds added until rows are decided (sweep.decide)
    # or judged on several metrics, the family's error shared over rows x metrics:
    # decide: {max_seeds: 7, metrics: [{name: val/loss, margin: 0.05}, {name: test/bleu, goal: maximize}]}
    slurm: {partition: gpu, gpus_per_run: 1, time_min: 240}  # with --backend slurm (ablate.sweep.slurm_settings)

Rows, ladder steps and swept parameters are the sweep's *factors*; each point records its level of each
(:attr:`Point.factors`), so that a report compares a row with the base row at the same values of the others.

Numbers may be written in any YAML form (``5e-4``). W&B's nested parameters (``model: {parameters: {...}}``)
are flattened to dotted keys. Keys W&B uses that ablate cannot honour (``command``, ``program``: ablate is
the program) are named in one warning line (:attr:`Sweep.ignored`), never dropped silently.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml

from ablate.runs.metrics import default_metric
from ablate.stats.design import MINIMIZE, Design, Judged
from ablate.stats.factorial import LADDER, ROW
from ablate.sweep.decide import Decide
from ablate.sweep.hyperband import Hyperband
from ablate.sweep.match import Match
from ablate.sweep.methods import DEFAULT_METHOD, SearchMethod, method_named
from ablate.sweep.params import Param
from ablate.sweep.slurm_settings import SlurmSettings

DEFAULT_VARIANT = "base"  # the name of a row, or of a point, that sets nothing
ROW_KEYS = ("name", "match")  # a row's own keys; every other key of a row is a config key


@dataclass(frozen=True)
class Point:
    """One planned run before its config is loaded: a variant (row + sampled values) and a seed."""

    variant: str
    seed: int | None
    values: dict[str, Any]  # dotted key -> value, rows', ladder step's and parameters' together (seed excluded)
    row: str = ""  # the row it comes from
    step: str = ""  # the ladder step it runs at ("" without a ladder)
    sampled: dict[str, Any] = field(default_factory=dict)  # the searched parameters' values (seed excluded)
    factors: dict[str, Any] = field(default_factory=dict)  # its level of each factor: row, ladder, varied parameters


@dataclass
class Sweep:
    """A parsed sweep file."""

    name: str
    path: Path
    method: str = DEFAULT_METHOD
    metric: dict[str, Any] = field(default_factory=default_metric)
    description: str = ""
    base_config: Path | None = None
    base_overrides: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # each with a "name"
    ladder: list[dict[str, Any]] = field(default_factory=list)  # sizes every row runs at, each with a "name"
    parameters: dict[str, Param] = field(default_factory=dict)  # dotted key -> parameter
    run_cap: int | None = None
    sampler_seed: int = 0
    match: Match | None = None  # matched budgets for every row but the base (a row's own ``match`` wins)
    evaluate: dict[str, Any] | None = None  # ``ablate evaluate`` options, run after training (None: no evaluation)
    early_terminate: Hyperband | None = None
    project: str | None = None  # W&B project and entity of every run
    entity: str | None = None
    decide: Decide = Decide()  # how rows are compared with the base: margin, sequential seeds, alpha
    slurm: SlurmSettings = SlurmSettings()  # what each job asks Slurm for, with --backend slurm
    imports: list[str] = field(default_factory=list)  # modules every run imports, found beside the sweep file
    ignored: list[str] = field(default_factory=list)  # W&B keys present that ablate does not honour
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def search(self) -> SearchMethod:
        """The method that chooses the points (:mod:`ablate.sweep.methods`)."""
        return method_named(self.method)

    @property
    def judged(self) -> tuple[Judged, ...]:
        """The metrics every row is judged on: the sweep's metric first (the report's headline), then the rest of
        ``decide.metrics`` as listed; without them the sweep's metric alone, at ``decide.margin``."""
        if not self.decide.metrics:
            return (Judged(self.metric["name"], self.metric["goal"], self.decide.margin),)
        return tuple(sorted(self.decide.metrics, key=lambda j: j.name != self.metric["name"]))

    def design(self, rows: int) -> Design:
        """The sweep's design (:mod:`ablate.stats.design`) with a family of ``rows`` comparisons on each judged
        metric (its margin: the first judged metric's; :meth:`Design.judging` gives each its own)."""
        first = tuple(s for s in self.seeds if isinstance(s, int))
        return Design(alpha=self.decide.alpha, rows=max(1, rows), margin=self.judged[0].margin, first=first,
                      max_seeds=self.decide.max_seeds, metrics=len(self.judged))

    @property
    def target(self) -> float | None:
        """metric.target: once a run reaches it, no new run starts (W&B's rule)."""
        return self.metric.get("target")

    def reached(self, value: float | None) -> bool:
        """Whether a run's metric value reaches the target."""
        if value is None or self.target is None or not math.isfinite(value):
            return False
        return value <= self.target if self.metric["goal"] == MINIMIZE else value >= self.target

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
    def sampled_seed(self) -> bool:
        """Whether each point draws its own seed (a seed distribution in a random or bayes sweep, as W&B does)
        rather than running once per listed seed (``values``: replicates, ablate's own reading)."""
        param = self.parameters.get("seed")
        return param is not None and not self.search.factorial and param.distribution not in ("constant", "categorical")

    @property
    def seeds(self) -> list[int | None]:
        """The seed replicates every point runs with ([None]: the config's own seed, or a seed drawn per point)."""
        param = self.parameters.get("seed")
        return [None] if param is None or self.sampled_seed else param.grid()

    @property
    def searched(self) -> dict[str, Param]:
        """The parameters a method chooses values of (every one but the seed, unless each point draws its seed)."""
        return {k: p for k, p in self.parameters.items() if k != "seed" or self.sampled_seed}

    @property
    def open_ended(self) -> bool:
        """A random or bayes sweep without run_cap: points keep coming until it is stopped (as W&B runs it)."""
        return not self.search.factorial and not self.run_cap

    def points(self) -> list[Point]:
        """Every run of a grid or a capped random sweep, in W&B's order: a grid is the product of the parameters
        in sorted name order (the seed among them; rows outermost), a random sweep is ``run_cap`` runs of its
        draws (rows drawn like a categorical parameter), each draw run once per listed seed. A bayes sweep
        chooses its points as runs finish (:mod:`ablate.sweep.bayes`); an open-ended one has no list
        (:meth:`stream`)."""
        return self.search.points(self)

    def grid(self) -> list[Point]:
        """Every cell of the sweep's grid, in W&B's order (rows outermost, then the parameters in sorted name order,
        the seed among them)."""
        return _grid(self)

    def stream(self) -> Iterator[Point]:
        """A random sweep's points, one draw after another without end, each draw once per listed seed."""
        rng = random.Random(self.sampler_seed)
        rows = self.rows or [{"name": ""}]
        while True:
            row, sampled = rng.choice(rows), {k: p.sample(rng) for k, p in self.searched.items()}
            yield from (self.point(row, sampled, seed) for seed in self.seeds)

    def point(self, row: dict[str, Any], sampled: dict[str, Any], seed: int | None,
              step: dict[str, Any] | None = None) -> Point:
        """The run of one row at one ladder step (a grid's), one choice of the searched parameters and one seed (a
        drawn seed is the run's)."""
        sampled, step = dict(sampled), step or {}
        if "seed" in sampled:
            seed = int(sampled.pop("seed"))
        factors = {ROW: row["name"]} if self.rows else {}
        factors.update({LADDER: step["name"]} if step else {})
        factors.update({k: v for k, v in sampled.items() if not self.searched[k].constant})
        name = _variant_name(row, sampled, self.searched, step.get("name", ""))
        return Point(name, seed, {**_row_values(row), **_row_values(step), **sampled}, row["name"],
                     step.get("name", ""), sampled, factors)

    def factor_levels(self) -> dict[str, list[Any]]:
        """Each factor of a grid sweep and its levels, in order: the rows (``row``), the ladder's steps (``ladder``),
        then every swept parameter but the seed, in the file's order; the first level of each is its base."""
        out: dict[str, list[Any]] = {ROW: [r["name"] for r in self.rows]} if self.rows else {}
        if self.ladder:
            out[LADDER] = [s["name"] for s in self.ladder]
        out.update({k: p.grid() for k, p in self.searched.items() if not p.constant})
        return out

    def n_samples(self) -> int | None:
        """How many points a bayes sweep asks for: run_cap / seeds, whole points (each runs once per listed
        seed); None when it is open-ended."""
        return max(1, self.run_cap // len(self.seeds)) if self.run_cap else None

    def notes(self, backend: str = "local") -> list[str]:
        """How ablate reads this file where it knowingly differs from W&B, or where W&B itself warns: one line each.
        ``backend`` is where the sweep runs (``local``, ``ray`` or ``wandb``): W&B's own engine chooses the points
        only with ``wandb``."""
        out = [p.warning for p in self.parameters.values() if p.warning]
        if self.ignored:
            out.append(f"{', '.join(self.ignored)} not used: ablate runs its own training (ablate train) for every run")
        controller = (self.raw.get("controller") or {}).get("type")
        if controller == "cloud" and backend != "wandb":
            out.append("controller: {type: cloud} not used: ablate's own pool chooses the points here (W&B's server "
                       "does with --backend wandb)")
        if controller == "local" and backend == "wandb":
            out.append("controller: {type: local} not used: with --backend wandb, W&B's server chooses the points")
        return out + self.search.notes(self, backend)


def _row_values(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ROW_KEYS}


def _short(key: str, value: Any) -> str:
    return f"{key.rsplit('.', 1)[-1]}={value}"


def _variant_name(row: dict[str, Any], sampled: dict[str, Any], params: dict[str, Param], step: str = "") -> str:
    varied = [k for k in sampled if not params[k].constant]
    parts = [row["name"]] if row.get("name") else [_short(k, v) for k, v in _row_values(row).items()]
    parts += [step] + [_short(k, _fmt(sampled[k])) for k in varied]
    return ", ".join(p for p in parts if p) or DEFAULT_VARIANT


def _fmt(value: Any) -> Any:
    """Floats as written (0.1), sampled ones shortened (0.1234 rather than 0.12340517...)."""
    return f"{value:.4g}" if isinstance(value, float) and len(str(value)) > 8 else value


def _grid(sweep: Sweep) -> list[Point]:
    """W&B's grid: itertools.product over the parameters in sorted name order (the seed among them), rows outermost;
    each point's values keep the file's order; a ladder's steps inside each row. Values that repeat are one point (W&B
    hashes them)."""
    params = sweep.parameters
    names = sorted(params)
    points, seen = [], set()
    for row, step in itertools.product(sweep.rows or [{"name": ""}], sweep.ladder or [{}]):
        for combo in itertools.product(*(params[k].grid() for k in names)):
            chosen = dict(zip(names, combo))
            sampled = {k: chosen[k] for k in params if k != "seed"}
            key = repr((row["name"], step.get("name"), sorted(chosen.items())))
            if key not in seen:
                seen.add(key)
                points.append(sweep.point(row, sampled, chosen.get("seed"), step))
    return points


def _yaml_value(value: Any) -> str:
    """A value as an override's right-hand side (OmegaConf parses it back as YAML)."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
