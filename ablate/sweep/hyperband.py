"""Early termination with W&B's hyperband rule (``early_terminate: {type: hyperband, ...}``).

W&B's rule (its ``sweeps`` engine; Li et al. 2018, Hyperband): a run's *history* is the sequence of
values it has logged for the sweep's metric (for ablate, one per validation), negated when the goal is
to maximize, so lower is better.

- Brackets ("bands") are iteration counts: with ``max_iter`` and ``s``, max_iter / eta, max_iter / eta^2,
  ... (s of them, whole numbers, those below 1 dropped), in increasing order; with ``min_iter``,
  min_iter, min_iter * eta, min_iter * eta^2, ...
- At each band b, the threshold is the value at position floor((1 / eta) * n) of the sorted b-th values of
  every run (running or finished) that has logged at least b values: the top 1/eta pass. (W&B multiplies
  by 1/eta, which is not always floor(n / eta) in floating point: at eta 1.1 and n = 33 W&B's position is 30,
  floor(n / eta) 29.)
- A running run is checked at the largest band it has reached: with ``strict`` (W&B's default) its b-th
  value, otherwise the best value it has logged, must not exceed that band's threshold, or it is stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ablate.errors import ConfigError
from ablate.stats.design import MAXIMIZE

KEYS = {"type", "max_iter", "min_iter", "s", "eta", "strict"}


@dataclass(frozen=True)
class Hyperband:
    """The bands and how strictly they cut."""

    bands: tuple[int, ...]
    eta: float
    strict: bool

    @classmethod
    def parse(cls, spec: Any, source: str) -> Hyperband | None:
        """``early_terminate`` of a sweep file; None when absent.

        Raises:
            ConfigError: not W&B's hyperband, or settings that give no band.
        """
        if spec is None:
            return None
        if not isinstance(spec, dict) or spec.get("type") != "hyperband":
            raise ConfigError("early_terminate", spec, "{type: hyperband, min_iter: N} or {type: hyperband, "
                              "max_iter: N, s: N}, with eta (default 3) and strict (default true)", source)
        unknown = set(spec) - KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(f"early_terminate.{key}", spec[key], f"one of {', '.join(sorted(KEYS))}", source)
        eta = spec.get("eta", 3)
        if not (isinstance(eta, (int, float)) and eta > 1):
            raise ConfigError("early_terminate.eta", eta, "a number above 1", source)
        strict = spec.get("strict", True)
        if not isinstance(strict, bool):
            raise ConfigError("early_terminate.strict", strict, "true or false (a YAML boolean, as W&B's schema "
                              "requires: \"false\" in quotes is a string)", source)
        if "max_iter" in spec:
            if "s" not in spec:
                raise ConfigError("early_terminate.s", None, "a number of bands, with max_iter", source)
            band, bands = float(spec["max_iter"]), []
            for _ in range(int(spec["s"])):
                band /= eta
                if band < 1:
                    break
                bands.append(int(band))
        elif "min_iter" in spec:
            if not (isinstance(spec["min_iter"], int) and spec["min_iter"] >= 1):
                raise ConfigError("early_terminate.min_iter", spec["min_iter"], "a positive integer", source)
            bands = [int(spec["min_iter"] * eta**i) for i in range(100) if spec["min_iter"] * eta**i < 1e9]
        else:
            raise ConfigError("early_terminate", spec, "min_iter, or max_iter with s", source)
        if not bands:
            raise ConfigError("early_terminate", spec, "settings that give at least one band (increase max_iter or "
                              "s, or lower eta)", source)
        return cls(tuple(sorted(bands)), float(eta), strict)

    def thresholds(self, histories: Sequence[Sequence[float]]) -> list[float]:
        """Each band's threshold from every run's history (lower is better)."""
        out = []
        for band in self.bands:
            values = sorted(h[band - 1] for h in histories if len(h) >= band)
            out.append(values[int((1.0 / self.eta) * len(values))] if values else math.inf)
        return out

    def to_stop(self, histories: Mapping[str, Sequence[float]], running: Sequence[str], goal: str) -> dict[str, str]:
        """The running runs to stop, each with the reason.

        Args:
            histories: every run's logged values of the metric, by run id (finished runs too).
            running: the ids of the runs still training.
            goal: ``minimize`` or ``maximize``.
        """
        sign = -1.0 if goal == MAXIMIZE else 1.0
        lowered = {run: [sign * v for v in h if math.isfinite(v)] for run, h in histories.items()}
        thresholds = self.thresholds([h for h in lowered.values() if h])
        stop = {}
        for run in running:
            h = lowered.get(run, [])
            reached = [(b, t) for b, t in zip(self.bands, thresholds) if b <= len(h)]
            if not reached:
                continue
            band, threshold = reached[-1]
            value = h[band - 1] if self.strict else min(h)
            if value > threshold:
                stop[run] = (f"stopped by hyperband at iteration {band}: {sign * value:.6g} is not in the top "
                             f"1/{self.eta:g} (threshold {sign * threshold:.6g})")
        return stop
