"""Matched budgets (Narang et al. 2021): re-solve one dimension so a row has the base's parameters or FLOPs.

A sweep (or a row) says ``match: params`` or ``match: {budget: flops, by: model.d_ff, tolerance: 0.005}``.
For each run of a matched row, the integer value of ``by`` is found whose built model comes closest to
the base row's parameter count (or training FLOPs per token, :mod:`ablate.model.flops`); counts come from
the model the config builds, so any component is counted as it is. The budget is assumed to grow with
``by`` (true of d_ff, d_model, layer counts, heads with fixed d_k): the search doubles until it passes the
target, then bisects. A row that sets ``by`` itself, or whose closest value misses the target by more
than the tolerance, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from omegaconf import DictConfig

from ablate.errors import ConfigError
from ablate.model.flops import flops_per_token

BUDGETS = ("params", "flops")
DEFAULT_BY = "model.d_ff"
DEFAULT_TOLERANCE = 0.005


@dataclass(frozen=True)
class Match:
    """What to hold fixed, and which key moves to hold it."""

    budget: str = "params"
    by: str = DEFAULT_BY
    tolerance: float = DEFAULT_TOLERANCE

    @classmethod
    def parse(cls, spec: Any, where: str, source: str) -> Match | None:
        """``params``, ``flops``, a mapping {budget, by, tolerance}, or None/false for no matching."""
        if spec in (None, False, "none"):
            return None
        if isinstance(spec, str):
            spec = {"budget": spec}
        if not isinstance(spec, dict) or set(spec) - {"budget", "by", "tolerance"}:
            raise ConfigError(where, spec, "params, flops, or {budget: params|flops, by: KEY, tolerance: FRACTION}",
                              source)
        match = cls(**{"budget": "params", "by": DEFAULT_BY, "tolerance": DEFAULT_TOLERANCE, **spec})
        if match.budget not in BUDGETS:
            raise ConfigError(f"{where}.budget", match.budget, f"one of {', '.join(BUDGETS)}", source)
        if not (isinstance(match.tolerance, (int, float)) and 0 < match.tolerance < 1):
            raise ConfigError(f"{where}.tolerance", match.tolerance, "a fraction in (0, 1), e.g. 0.005", source)
        return match


def budget_of(cfg: DictConfig, budget: str) -> float:
    """The parameter count, or the training FLOPs per target token, of the model ``cfg`` builds."""
    if budget == "flops":
        return flops_per_token(cfg)
    from ablate.model import count_parameters
    from ablate.model.meta import build_on_meta

    return float(count_parameters(build_on_meta(cfg))["total"])


def solve(match: Match, target: float, config_for: Callable[[int], DictConfig], start: int, *,
          row: str, source: str) -> tuple[int, float]:
    """The integer value of ``match.by`` whose budget comes closest to ``target``.

    Args:
        match: what to match.
        target: the base row's budget.
        config_for: the validated config of this row with ``match.by`` set to a value (raises ConfigError
            for values the config does not allow, e.g. a d_model that the heads do not divide).
        start: the row's own value of ``match.by``, where the search begins.
        row: the row's name, for errors.

    Returns:
        The value and its budget.

    Raises:
        ConfigError: no allowed value within the tolerance.
    """
    cache: dict[int, float | None] = {}

    def value(v: int) -> float | None:
        if v not in cache:
            try:
                cache[v] = budget_of(config_for(v), match.budget) if v >= 1 else None
            except ConfigError:
                cache[v] = None
        return cache[v]

    lo, hi = _bracket(value, target, max(1, start))
    near = [v for v in (lo, hi) if value(v) is not None]
    if not near:  # neither end is allowed (a d_model the heads do not divide): the closest allowed ones
        near = [v for v in (*range(lo - 1, max(0, lo - 64), -1), *range(hi + 1, hi + 64)) if value(v) is not None][:2]
    if not near:
        raise ConfigError("match", match.budget, f"a row whose {match.by} can be set: no value is allowed for {row!r}",
                          source)
    best = min(near, key=lambda v: abs(value(v) - target))
    error = (value(best) - target) / target
    if abs(error) > match.tolerance:
        raise ConfigError("match", f"{match.budget} by {match.by}",
                          f"a row that some {match.by} brings within {match.tolerance:.1%} of the base's "
                          f"{_fmt(target, match.budget)}; for {row!r} the closest is {match.by}={best} with "
                          f"{_fmt(value(best), match.budget)} ({error:+.1%})", source)
    return best, value(best)


def _bracket(value: Callable[[int], float | None], target: float, start: int) -> tuple[int, int]:
    """Two neighbouring values lo < hi with budget(lo) < target <= budget(hi) (or the ends of the range).

    The first guess extends the line through ``start`` and ``2 start`` (exact when the budget is affine in
    the value, as parameters are in d_ff); from there the bracket is found by doubling steps and bisection.
    """
    def below(v: int) -> bool:
        got = value(v)
        if got is None:  # not allowed: judge by the nearest allowed value under it
            got = next((value(u) for u in range(v - 1, max(0, v - 64), -1) if value(u) is not None), None)
        return got is not None and got < target

    a, b = start, 2 * start
    fa, fb = value(a), value(b)
    guess = round(a + (target - fa) * (b - a) / (fb - fa)) if fa is not None and fb is not None and fb != fa else a
    guess, step = max(1, guess), 1
    if below(guess):
        lo, hi = guess, guess + 1
        while below(hi) and hi < 2**24:
            lo, hi, step = hi, hi + 2 * step, 2 * step
    else:
        lo, hi = guess - 1, guess
        while lo >= 1 and not below(lo):
            hi, lo, step = lo, lo - 2 * step, 2 * step
        lo = max(lo, 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    return max(lo, 1), hi


def _fmt(x: float, budget: str) -> str:
    return f"{x / 1e6:.4g}M parameters" if budget == "params" else f"{x / 1e6:.4g} MFLOPs per token"
