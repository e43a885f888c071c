"""What a sweep compares: its cells and the contrasts between them, like with like.

A grid sweep's runs are cells of a factorial design. Each planned run records its level of every *factor*
(``factors`` in plan.json): its row (factor ``row``), its size-ladder step (``ladder``) and the value of each
swept parameter but the seed. A variant is one cell; its runs are the cell's seeds. The first level of a factor
is its reference: the base row, the first value a parameter lists.

Contrasts, each a weighted sum of cells split into a side ``x`` (positive weights) and a side ``y`` (negative),
so that x - y is the contrast, seed by seed, and the report's comparison (paired on the seeds both sides ended,
sequential looks, failed runs as outcomes: :func:`ablate.stats.compare.compare`) applies unchanged:

- **simple**: a row against the base row *at the same level of every other factor* (its stratum), the table's
  rows. Without rows every variant is its own row, compared with the base variant, as before.
- for a **two-factor** design (rows x one parameter, or two parameters; no ladder): the **main effect** of each
  level of each factor (against its reference, averaged over the other factor's levels), the **simple effects**
  of the second factor within each level of the first, and the **interaction** of each pair of non-reference
  levels: (Y(a, b) - Y(a0, b)) - (Y(a, b0) - Y(a0, b0)), the difference of differences.
- for a **ladder**: each row's **trend**, the least-squares slope of its Δ against log2 of the base's parameter
  count over the steps (per seed, so paired like the rest): the change in Δ for each doubling of size.

Every contrast of a table is one member of the family the correction spreads the error over. All but the trends
ask for seeds while undecided, in a sequential design; the trends are judged at the seeds the rest reached, with
the same repeated intervals, which stay valid whatever stopped the sweep.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from ablate.stats.compare import Comparison, compare
from ablate.stats.design import Design as StatsDesign

ROW, LADDER = "row", "ladder"
SIMPLE, MAIN, WITHIN, INTERACTION, TREND = "simple", "main effect", "simple effect", "interaction", "trend"

Cells = Mapping[str, Mapping[str, Any]]  # variant -> its level of each factor


@dataclass(frozen=True)
class Factor:
    """A factor of the design and its levels, the reference first."""

    name: str
    levels: tuple[Any, ...]

    @property
    def reference(self) -> Any:
        return self.levels[0]

    def label(self, level: Any) -> str:
        """``pre`` for a row or a ladder step, ``warmup=0`` for a parameter."""
        if self.name in (ROW, LADDER):
            return str(level)
        return f"{self.name.rsplit('.', 1)[-1]}={_text(level)}"


@dataclass(frozen=True)
class Contrast:
    """One comparison of the family: ``plus`` minus ``minus`` (weighted cells), seed by seed."""

    kind: str  # SIMPLE, MAIN, WITHIN, INTERACTION or TREND
    label: str  # what it compares, for reading
    plus: tuple[tuple[str, float], ...]  # (variant, weight)
    minus: tuple[tuple[str, float], ...]
    reference: str  # the cell whose mean a relative margin is a percentage of
    row: str = ""  # simple contrasts: the compared variant; trends: its row
    stratum: str = ""  # simple contrasts: the other factors' levels, for reading ("" without strata)
    levels: tuple[str, ...] = ()  # simple effects: (the effect's level, the level it is at); interactions: (the first
    # factor's level, the second's, the first factor's reference)

    @property
    def drives(self) -> bool:
        """Whether it asks for seeds while undecided (a sequential design); a trend is judged where the rest stop."""
        return self.kind != TREND

    @property
    def cells(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for v, _ in (*self.plus, *self.minus)))

    def weights(self) -> dict[str, float]:
        """Each cell's weight in the contrast (``plus`` positive, ``minus`` negative): the contrast is their sum."""
        out: dict[str, float] = {}
        for sign, side in ((1.0, self.plus), (-1.0, self.minus)):
            for variant, w in side:
                out[variant] = out.get(variant, 0.0) + sign * w
        return out


def key(level: Any) -> str:
    """A level as a hashable key (levels may be mappings: a component's arguments)."""
    return json.dumps(level, sort_keys=True, default=str)


def _text(level: Any) -> str:
    if isinstance(level, float):
        return f"{level:g}"
    if isinstance(level, dict):
        return "{" + ", ".join(f"{k}: {_text(v)}" for k, v in level.items()) + "}"
    return str(level)


def factors_of(spec: Sequence[Mapping[str, Any]]) -> list[Factor]:
    """The factors a plan.json lists (``[{"name": ..., "levels": [...]}, ...]``)."""
    return [Factor(str(f["name"]), tuple(f["levels"])) for f in spec]


class Factorial:
    """The cells of a sweep and the contrasts its report makes (see the module docstring).

    Args:
        factors: the factors, in order (rows first); none for a plan written before factors were recorded.
        cells: each variant's levels (variants in plan order).
        base: the base variant (the reference cell).
        excluded: variants kept out of every contrast's family (a mask that leaks labels).
        parameters: each variant's parameter count: a ladder step's size is the base row's there, for trends.
    """

    def __init__(self, factors: Sequence[Factor], cells: Cells, base: str, excluded: frozenset[str] = frozenset(),
                 parameters: Mapping[str, float | None] | None = None):
        self.factors = [f for f in factors if len(f.levels) > 1]  # one level: no factor (nothing to contrast)
        self.cells, self.base, self.excluded = dict(cells), base, excluded
        base_row = self.cells.get(base, {}).get(ROW)
        self.sizes = {levels[LADDER]: (parameters or {}).get(v) for v, levels in self.cells.items()
                      if LADDER in levels and levels.get(ROW) == base_row}
        known = {f.name for f in self.factors}
        self.by_levels = {tuple(key(c.get(n)) for n in known): v for v, c in self.cells.items()}
        self._names = tuple(known)
        self.row_factor = next((f for f in self.factors if f.name == ROW), None)
        self.strata_factors = [f for f in self.factors if f.name != ROW] if self.row_factor else []
        self.missing: list[str] = []  # strata without their base cell, said in the report
        self.contrasts = self._simple() + self._factorial() + self._trends()
        self.same = _representatives(self.contrasts)  # each contrast -> the first one with the same weights

    def cell(self, levels: Mapping[str, Any]) -> str | None:
        """The variant at these levels (every factor named), or None when the sweep did not plan it."""
        return self.by_levels.get(tuple(key(levels.get(n)) for n in self._names))

    def stratum(self, variant: str) -> str:
        """A variant's levels of the factors other than the row, for reading: ``warmup=0``, ``4M``."""
        levels = self.cells.get(variant, {})
        return ", ".join(f.label(levels.get(f.name)) for f in self.strata_factors)

    def stratum_base(self, variant: str) -> str | None:
        """The base row's cell at a variant's stratum; the base variant when the sweep has no strata."""
        if self.row_factor is None or variant not in self.cells:
            return self.base
        return self.cell({**self.cells[variant], ROW: self.row_factor.reference})

    def is_base(self, variant: str) -> bool:
        """Whether a variant is the base row's cell in its stratum."""
        return self.stratum_base(variant) == variant

    def _simple(self) -> list[Contrast]:
        out = []
        for variant in self.cells:
            base = self.stratum_base(variant)
            if base is None:
                self.missing.append(self.stratum(variant))
                continue
            if variant != base:
                out.append(Contrast(SIMPLE, f"{variant} vs {base}", ((variant, 1.0),), ((base, 1.0),), base,
                                    row=variant, stratum=self.stratum(variant)))
        self.missing = list(dict.fromkeys(self.missing))
        return out

    def two_factors(self) -> tuple[Factor, Factor] | None:
        """The two factors of a complete two-factor grid (no ladder), else None."""
        if len(self.factors) != 2 or any(f.name == LADDER for f in self.factors):
            return None
        a, b = self.factors
        if any(self.cell({a.name: la, b.name: lb}) is None for la in a.levels for lb in b.levels):
            return None
        return a, b

    def _factorial(self) -> list[Contrast]:
        pair = self.two_factors()
        if pair is None:
            return []
        a, b = pair
        at = lambda la, lb: self.cell({a.name: la, b.name: lb})  # noqa: E731
        ref = at(a.reference, b.reference)
        out = []
        for main, other in ((a, b), (b, a)):
            for level in main.levels[1:]:
                w = 1.0 / len(other.levels)
                cell = (lambda m, o: at(m, o)) if main is a else (lambda m, o: at(o, m))
                out.append(Contrast(MAIN, f"{main.label(level)}, averaged over {_name(other)}",
                                    tuple((cell(level, lo), w) for lo in other.levels),
                                    tuple((cell(main.reference, lo), w) for lo in other.levels), ref))
        for la in a.levels:  # the second factor's simple effects within each level of the first
            for lb in b.levels[1:]:
                out.append(Contrast(WITHIN, f"{b.label(lb)} at {a.label(la)}", ((at(la, lb), 1.0),),
                                    ((at(la, b.reference), 1.0),), at(la, b.reference),
                                    levels=(b.label(lb), a.label(la))))
        for la in a.levels[1:]:
            for lb in b.levels[1:]:
                out.append(Contrast(INTERACTION, f"{a.label(la)} x {b.label(lb)}",
                                    ((at(la, lb), 1.0), (ref, 1.0)),
                                    ((at(a.reference, lb), 1.0), (at(la, b.reference), 1.0)), ref,
                                    levels=(a.label(la), b.label(lb), a.label(a.reference))))
        return [c for c in out if not set(c.cells) & self.excluded]

    def _trends(self) -> list[Contrast]:
        ladder = next((f for f in self.factors if f.name == LADDER), None)
        if ladder is None or self.row_factor is None or len(self.factors) != 2:
            return []
        z = {s: math.log2(self.sizes[s]) for s in ladder.levels if self.sizes.get(s)}
        if len(set(z.values())) < 2:
            return []
        mean = sum(z.values()) / len(z)
        ss = sum((v - mean) ** 2 for v in z.values())
        w = {s: (v - mean) / ss for s, v in z.items()}
        out = []
        for row in self.row_factor.levels[1:]:
            cells = {s: (self.cell({ROW: row, LADDER: s}), self.cell({ROW: self.row_factor.reference, LADDER: s}))
                     for s in w}
            if any(None in pair or set(pair) & self.excluded for pair in cells.values()):
                continue
            up, down = [s for s in w if w[s] > 0], [s for s in w if w[s] < 0]  # the row's cell at a step: +w
            plus = tuple((cells[s][0], w[s]) for s in up) + tuple((cells[s][1], -w[s]) for s in down)
            minus = tuple((cells[s][0], -w[s]) for s in down) + tuple((cells[s][1], w[s]) for s in up)
            out.append(Contrast(TREND, f"{row}: Δ per doubling of size", plus, minus, self.base, row=str(row)))
        return out

    def family(self) -> list[Contrast]:
        """The contrasts the correction covers: every *distinct* one whose cells include no excluded variant. Two
        contrasts with the same weights on the same cells (a row against the base, and the second factor's simple
        effect at the first factor's reference) are one test, tested once and counted once."""
        return [c for c in self.contrasts if self.same[c] is c and not set(c.cells) & self.excluded]


def _weights_key(contrast: Contrast) -> tuple:
    """What makes two contrasts one test: their cells' weights (a trend's unit differs: never one with the rest)."""
    weights = sorted((v, round(w, 12)) for v, w in contrast.weights().items() if abs(w) > 1e-12)
    return contrast.kind == TREND, tuple(weights)


def _representatives(contrasts: Sequence[Contrast]) -> dict[Contrast, Contrast]:
    """Each contrast mapped to the first of the list with the same weights (itself, when it is the first)."""
    first: dict[tuple, Contrast] = {}
    return {c: first.setdefault(_weights_key(c), c) for c in contrasts}


def _name(factor: Factor) -> str:
    return {ROW: "the rows", LADDER: "the sizes"}.get(factor.name, factor.name.rsplit(".", 1)[-1])


def sides(contrast: Contrast, ended: Mapping[str, Mapping[int, float]]) -> tuple[dict[int, float], dict[int, float]]:
    """The contrast's two sides by seed, each over the seeds every one of its cells ended: the weighted sum of their
    values, NaN when one of them failed there (a failed run stays an outcome of the side it belongs to)."""

    def side(cells: tuple[tuple[str, float], ...]) -> dict[int, float]:
        seeds = set.intersection(*(set(ended.get(v, {})) for v, _ in cells))
        return {s: math.fsum(w * ended[v][s] for v, w in cells) for s in sorted(seeds)}

    return side(contrast.plus), side(contrast.minus)


def judge(contrast: Contrast, ended: Mapping[str, Mapping[int, float]], design: StatsDesign, goal: str, *,
          interim: bool = False) -> Comparison:
    """The contrast's comparison (:func:`ablate.stats.compare.compare`) on its two sides. A relative margin is a
    percentage of the reference cell's mean over the seeds of the look that judged the contrast (a side may sum two
    cells), so that seeds the reference gains later, for another contrast, cannot move a decision already taken; a
    trend has no margin (its unit is Δ per doubling of size)."""
    x, y = sides(contrast, ended)
    design = replace(design, margin=None) if contrast.kind == TREND else design
    return compare(x, y, design, goal, interim=interim, reference=dict(ended.get(contrast.reference, {})))
