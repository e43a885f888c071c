"""Sweep parameters with W&B's semantics: the distributions, how they are inferred, sampled and gridded.

Every parameter form that W&B's sweep schema accepts is read the way W&B's own engine reads it:

- ``value`` (constant); ``values`` (categorical), with ``probabilities`` (weights that sum to 1);
- ``min``/``max`` without a ``distribution``: ``int_uniform`` when both are written as integers (``1``, ``5``),
  else ``uniform`` (``1.0`` is a float, as W&B's schema reads it: ``{min: 0.0, max: 1.0}`` draws reals);
- ``uniform``, ``int_uniform``, ``q_uniform``; ``log_uniform`` (min and max are exponents: e^U(min, max)),
  ``log_uniform_values`` (min and max are values), ``inv_log_uniform`` (e^-U(min, max)),
  ``inv_log_uniform_values`` (1/X log-uniform between 1/max and 1/min), ``q_log_uniform(_values)``;
  ``normal``, ``q_normal``, ``log_normal``, ``q_log_normal`` (mu 0, sigma 1 by default); ``beta``,
  ``q_beta`` (a 1, b 1 by default). A ``q_`` form rounds to a multiple of ``q`` (default 1).
- a grid takes constants, categoricals, ``int_uniform`` (every integer from min to max) and ``q_uniform``
  (min, min + q, ... below max, as ``numpy.arange(min, max, q)``); probabilities are not for grids.

A parameter is a :class:`Param`; its values are drawn by inverting its distribution's CDF at a uniform
random number (:meth:`Param.sample`), the draw W&B's random search makes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ablate.errors import ConfigError

BOUNDED = {"uniform", "int_uniform", "q_uniform", "log_uniform", "log_uniform_values", "inv_log_uniform",
           "inv_log_uniform_values", "q_log_uniform", "q_log_uniform_values", "beta", "q_beta"}
UNBOUNDED = {"normal", "q_normal", "log_normal", "q_log_normal"}
DISTRIBUTIONS = {"constant", "categorical", "categorical_w_probabilities"} | BOUNDED | UNBOUNDED
GRIDDABLE = {"constant", "categorical", "int_uniform", "q_uniform"}
DEFAULTS = {"normal": {"mu": 0.0, "sigma": 1.0}, "log_normal": {"mu": 0.0, "sigma": 1.0},
            "q_normal": {"mu": 0.0, "sigma": 1.0, "q": 1.0}, "q_log_normal": {"mu": 0.0, "sigma": 1.0, "q": 1.0},
            "beta": {"a": 1.0, "b": 1.0}, "q_beta": {"a": 1.0, "b": 1.0, "q": 1.0}, "q_uniform": {"q": 1.0},
            "q_log_uniform": {"q": 1.0}, "q_log_uniform_values": {"q": 1.0}}
DEPRECATED = {"log_uniform": "log_uniform_values", "q_log_uniform": "q_log_uniform_values",
              "inv_log_uniform": "inv_log_uniform_values"}  # W&B warns: their min and max are exponents
MAX_EXPONENT = 700  # e^x overflows a float past about 709.78
KEYS = {"value", "values", "probabilities", "distribution", "min", "max", "q", "mu", "sigma", "a", "b"}


def _whole(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) or isinstance(x, float) and x.is_integer()


def _integer(x: Any) -> bool:
    """Written as an integer (``5``, not ``5.0``): what W&B's schema takes for an inferred int_uniform."""
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass(frozen=True)
class Param:
    """One sweep parameter: its distribution and that distribution's settings (defaults filled in)."""

    key: str
    distribution: str
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, key: str, spec: Any, source: str) -> Param:
        """Read a parameter as W&B does (inferring the distribution, filling defaults), or name what is wrong."""
        where = f"parameters.{key}"
        if not isinstance(spec, dict) or not spec:
            raise ConfigError(where, spec, "a mapping with value, values, or min and max, or a distribution", source)
        unknown = set(spec) - KEYS
        if unknown:
            raise ConfigError(f"{where}.{sorted(unknown)[0]}", spec[sorted(unknown)[0]],
                              f"a key of a W&B parameter: {', '.join(sorted(KEYS))}", source)
        shapes = [k for k in ("value", "values", "min") if k in spec]
        if len(shapes) > 1:  # W&B would take the first it looks for and drop the others without a word
            raise ConfigError(where, spec, f"one of value (a constant), values (a list) or min and max (a range): this "
                              f"one gives {' and '.join(shapes)}", source)
        dist = spec.get("distribution") or cls._infer(spec)
        if dist not in DISTRIBUTIONS:
            raise ConfigError(f"{where}.distribution", dist, f"one of {', '.join(sorted(DISTRIBUTIONS))}", source)
        if dist == "categorical" and "probabilities" in spec:
            dist = "categorical_w_probabilities"
        settings = {**DEFAULTS.get(dist, {}), **{k: v for k, v in spec.items() if k != "distribution"}}
        param = cls(key, dist, settings)
        param._check(where, source)
        return param

    @staticmethod
    def _infer(spec: dict[str, Any]) -> str | None:
        if "value" in spec:
            return "constant"
        if "values" in spec:
            return "categorical"
        if "min" in spec and "max" in spec:
            return "int_uniform" if _integer(spec["min"]) and _integer(spec["max"]) else "uniform"
        return None

    def _check(self, where: str, source: str) -> None:
        s, d = self.settings, self.distribution
        if d == "constant" and "value" not in s:
            raise ConfigError(where, s, "a value for a constant", source)
        if d.startswith("categorical"):
            values = s.get("values")
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{where}.values", values, "a non-empty list of values", source)
            if d == "categorical_w_probabilities":
                p = s.get("probabilities")
                if not isinstance(p, list) or len(p) != len(values) or not all(map(_number, p)) \
                        or not np.isclose(sum(p), 1.0) or min(p) < 0:  # W&B's own test of the sum
                    raise ConfigError(f"{where}.probabilities", p, f"{len(values)} non-negative numbers that sum to 1",
                                      source)
        if d in BOUNDED:
            lo, hi = s.get("min", 0 if "beta" in d else None), s.get("max", 1 if "beta" in d else None)
            if "beta" not in d and not (_number(lo) and _number(hi) and lo < hi):
                raise ConfigError(where, {"min": lo, "max": hi}, "numbers min < max", source)
            if d in ("log_uniform_values", "inv_log_uniform_values", "q_log_uniform_values") and lo <= 0:
                raise ConfigError(f"{where}.min", lo, f"a positive number for {d}", source)
            if d in ("log_uniform", "q_log_uniform") and hi > MAX_EXPONENT:
                raise ConfigError(f"{where}.max", hi, f"an exponent of at most {MAX_EXPONENT} ({d} draws e^x, and e^"
                                  f"{hi:g} is beyond a float)", source)
            if d == "inv_log_uniform" and lo < -MAX_EXPONENT:
                raise ConfigError(f"{where}.min", lo, f"an exponent of at least -{MAX_EXPONENT} ({d} draws e^-x)",
                                  source)
            if d == "int_uniform" and not (_whole(lo) and _whole(hi)):
                raise ConfigError(where, {"min": lo, "max": hi}, "whole numbers for int_uniform", source)
        if d in ("log_normal", "q_log_normal") and _number(s.get("mu")) and s["mu"] > MAX_EXPONENT:
            raise ConfigError(f"{where}.mu", s["mu"], f"an exponent of at most {MAX_EXPONENT} ({d} draws e^N(mu, "
                              "sigma))", source)
        for name in ("q", "sigma", "a", "b"):
            if name in s and not (_number(s[name]) and s[name] > 0):
                raise ConfigError(f"{where}.{name}", s[name], "a positive number", source)

    @property
    def warning(self) -> str | None:
        """W&B's deprecation warning for this parameter's distribution, if any."""
        if self.distribution in DEPRECATED:
            return (f"parameters.{self.key}: {self.distribution} is deprecated in W&B (its min and max are base-e "
                    f"exponents); {DEPRECATED[self.distribution]} takes the values themselves")
        return None

    @property
    def constant(self) -> bool:
        return self.distribution == "constant"

    def grid(self) -> list[Any]:
        """The values a grid search takes, as W&B expands them (int ranges whole, q_uniform as arange)."""
        s, d = self.settings, self.distribution
        if d == "constant":
            return [s["value"]]
        if d == "categorical":
            return list(s["values"])
        if d == "int_uniform":
            return list(range(int(s["min"]), int(s["max"]) + 1))
        if d == "q_uniform":
            return [_tidy(x, s["q"]) for x in np.arange(s["min"], s["max"], s["q"]).tolist()]
        raise ValueError(f"{self.key}: {d} has no grid")

    def ppf(self, u: float) -> Any:
        """The value at quantile ``u`` in [0, 1): inverse CDF (W&B's sampling)."""
        s, d = self.settings, self.distribution
        lo, hi, q = s.get("min"), s.get("max"), s.get("q")
        if d == "constant":
            return s["value"]
        if d == "categorical":
            return s["values"][min(int(u * len(s["values"])), len(s["values"]) - 1)]
        if d == "categorical_w_probabilities":
            index = int(np.searchsorted(np.cumsum(s["probabilities"]), u, side="right"))
            return s["values"][min(index, len(s["values"]) - 1)]
        if d == "int_uniform":
            return int(lo) + min(int(u * (int(hi) - int(lo) + 1)), int(hi) - int(lo))
        if d in ("uniform", "q_uniform"):
            x = lo + u * (hi - lo)
        elif d in ("log_uniform", "q_log_uniform"):
            x = math.exp(lo + u * (hi - lo))
        elif d in ("log_uniform_values", "q_log_uniform_values"):
            x = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        elif d == "inv_log_uniform":
            x = math.exp(-(lo + (1 - u) * (hi - lo)))
        elif d == "inv_log_uniform_values":
            x = 1 / math.exp(-math.log(hi) + (1 - u) * (math.log(hi) - math.log(lo)))
        elif d in ("normal", "q_normal"):
            from scipy import stats  # only these distributions need it (and it is slow to import)

            x = float(stats.norm.ppf(u, loc=s["mu"], scale=s["sigma"]))
        elif d in ("log_normal", "q_log_normal"):
            from scipy import stats

            x = float(stats.lognorm.ppf(u, s=s["sigma"], scale=math.exp(s["mu"])))
        else:  # beta, q_beta
            from scipy import stats

            x = float(stats.beta.ppf(u, a=s["a"], b=s["b"]))
        return _tidy(round(x / q) * q, q) if d.startswith("q_") else x

    def wandb(self) -> dict[str, Any]:
        """The parameter in W&B's form, as its sweep schema takes it."""
        if self.distribution == "constant":
            return {"value": self.settings["value"]}
        if self.distribution == "categorical":
            return {"values": list(self.settings["values"])}
        return {"distribution": self.distribution, **self.settings}

    def sample(self, rng: random.Random) -> Any:
        """One draw, from a uniform random number."""
        return self.ppf(rng.random())


def _tidy(x: float, q: float) -> int | float:
    """A multiple of q as written: an int when q is whole (3, not 3.0), else rounded to q's decimals."""
    if _whole(q) and float(x).is_integer():
        return int(round(x))
    decimals = max(0, -int(math.floor(math.log10(abs(q))))) + 6
    return round(float(x), decimals)


def flatten(params: Any, source: str, prefix: str = "") -> dict[str, Param]:
    """W&B's nested form (``model: {parameters: {n_heads: ...}}``) as dotted keys, each parsed."""
    if not isinstance(params, dict):
        raise ConfigError("parameters", params, "a mapping of parameter names to W&B parameter specs", source)
    out: dict[str, Param] = {}
    for key, spec in params.items():
        full = f"{prefix}{key}"
        if isinstance(spec, dict) and "parameters" in spec:
            out.update(flatten(spec["parameters"], source, f"{full}."))
        else:
            out[full] = Param.parse(full, spec, source)
    return out
