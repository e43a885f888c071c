"""Sweeps judged on two metrics (val loss, minimized; BLEU, maximized), simulated where the truth is known, and the
sequential design's joint rule, run look by look through ``judge_paired`` itself. Shared by
tests/stats/test_several_metrics.py and ``benchmarks/verdicts.py`` (section ``metrics``).

The rule (:mod:`ablate.sweep.decide`): a row gets a seed more while any of its metrics is undecided at its last look
(and it has fewer than ``max_seeds``); each metric's verdict is the one at that metric's own first deciding look, else
at the row's last look. :func:`judge_row` replays it: at each look the rows still going are judged on their first n
seeds, on every metric, and a row stops at the first look where every metric has been decided; each metric's
judgement is the one made on the seeds up to that stop look, no others.

Each row's per-seed differences are drawn jointly: sd 0.02 on val loss and 0.2 BLEU, margins 0.05 and 0.5 (the
margins of experiments/table3_multi30k.yaml, 2.5 sd each), correlated ``rho`` in the direction of improvement (a seed
on which the row's loss is lower tends to have a higher BLEU: corr(-d_loss, d_bleu) = rho).
"""

from __future__ import annotations

import numpy as np

from ablate.stats import verdict as V
from ablate.stats.design import Design, Judged, Margin
from ablate.stats.judge import Judgement, judge_paired
from tests.stats.claims import false_claims

LOSS = Judged("val/loss", "minimize", Margin(0.05))
BLEU = Judged("test/bleu", "maximize", Margin(0.5))
METRICS = (LOSS, BLEU)
SD = {LOSS.name: 0.02, BLEU.name: 0.2}  # the per-seed difference's sd, in the metric's units
LEVEL = {LOSS.name: 2.0, BLEU.name: 30.0}  # the base's mean; the base's seeds spread by the same sd around it
ROWS, FIRST, MAX_SEEDS = 3, (0, 1, 2), 10
RHOS = (0.0, 0.5, 0.9)


def designs(rows: int = ROWS, metrics: int = len(METRICS)) -> dict[str, Design]:
    """The fixed design (10 seeds) and the sequential one (3 to 10), their family over rows x ``metrics``."""
    return {"fixed 10": Design(rows=rows, metrics=metrics),
            "sequential 3→10": Design(rows=rows, metrics=metrics, first=FIRST, max_seeds=MAX_SEEDS)}


def draw(rng: np.random.Generator, sims: int, rho: float, deltas) -> tuple[dict, list[dict]]:
    """The base's values and each row's, per metric: ``{name: (sims, MAX_SEEDS)}``; ``deltas`` gives each row's true
    Δ (row - base) on each metric in sds, ``[(loss, bleu), ...]``."""
    base = {m.name: LEVEL[m.name] + rng.normal(0, SD[m.name], (sims, MAX_SEEDS)) for m in METRICS}
    rows = []
    for loss, bleu in deltas:
        z = rng.standard_normal((2, sims, MAX_SEEDS))
        d_loss = SD[LOSS.name] * (loss + z[0])
        d_bleu = SD[BLEU.name] * (bleu - rho * z[0] + np.sqrt(1 - rho ** 2) * z[1])
        rows.append({LOSS.name: base[LOSS.name] + d_loss, BLEU.name: base[BLEU.name] + d_bleu})
    return base, rows


def take(j: Judgement, keep: np.ndarray) -> Judgement:
    """The sweeps ``keep`` (a boolean mask) of a judgement."""
    fields = {name: getattr(j, name)[keep] for name in Judgement.__dataclass_fields__ if name != "history"}
    return Judgement(**fields, history=[h for h, k in zip(j.history, keep) if k])


def gather(parts: list[tuple[np.ndarray, Judgement]]) -> Judgement:
    """One judgement of every sweep from judgements of disjoint groups ``(indices, judgement)``, in sweep order."""
    order = np.argsort(np.concatenate([idx for idx, _ in parts]))
    fields = {name: np.concatenate([getattr(j, name) for _, j in parts])[order]
              for name in Judgement.__dataclass_fields__ if name != "history"}
    history = [h for _, j in parts for h in j.history]
    return Judgement(**fields, history=[history[i] for i in order])


def judge_row(base: dict, row: dict, design: Design, metrics=METRICS) -> tuple[np.ndarray, dict[str, Judgement]]:
    """One row on every metric under the design's rule: its seeds (the stop look), and each metric's judgement on the
    seeds up to it. A fixed design judges all seeds; a sequential one goes look by look (see the module docstring)."""
    sims, seeds = base[metrics[0].name].shape
    if not design.sequential:
        return np.full(sims, seeds), {m.name: judge_paired(row[m.name], base[m.name], design.judging(m), m.goal)
                                      for m in metrics}
    going, stop = np.ones(sims, bool), np.full(sims, seeds)
    parts: dict[str, list] = {m.name: [] for m in metrics}
    for n in design.looks(seeds):
        idx = np.flatnonzero(going)
        now = {m.name: judge_paired(row[m.name][idx, :n], base[m.name][idx, :n], design.judging(m), m.goal)
               for m in metrics}
        done = np.all([j.decided_at > 0 for j in now.values()], axis=0) | (n == seeds)
        for name, j in now.items():
            parts[name].append((idx[done], take(j, done)))
        stop[idx[done]], going[idx[done]] = n, False
    return stop, {name: gather(p) for name, p in parts.items()}


def read(base: np.ndarray, row: np.ndarray, seeds: np.ndarray, design: Design, goal: str) -> Judgement:
    """The report's reading of one metric when each sweep's row has run its first ``seeds[b]`` seeds (grouped by
    that count): ``judge_paired`` on those seeds and the base's same seeds."""
    return gather([(np.flatnonzero(seeds == n), judge_paired(row[seeds == n, :n], base[seeds == n, :n], design, goal))
                   for n in np.unique(seeds)])


def family(rng, sims: int, rho: float, deltas, design: Design, metrics=METRICS, margins: bool = True):
    """Some statement of the table false (the true Δ contradicts it; with margins a false *equivalent* at Δ = margin
    counts), the mean seeds per row, and each row's (stop, judgements)."""
    base, rows = draw(rng, sims, rho, deltas)
    judged = [m if margins else Judged(m.name, m.goal) for m in metrics]
    wrong, seeds, out = np.zeros(sims, bool), 0.0, []
    for true, row in zip(deltas, rows):
        stop, js = judge_row(base, row, design, judged)
        for m in judged:
            delta = dict(zip((LOSS.name, BLEU.name), true))[m.name] * SD[m.name]
            wrong |= false_claims(js[m.name].verdict, delta, m.goal, m.margin and m.margin.value)
        seeds += stop.mean() / len(deltas)
        out.append((stop, js))
    return wrong.mean(), seeds, (base, rows, out)


NULL = [(0.0, 0.0)] * ROWS
AT_MARGIN = [(0.0, 0.0), (2.5, -2.5), (-2.5, 2.5)]  # no effect; worse by the margin on both; better by it on both


def speculative(rng, sims: int, rho: float, extra=(1, 2)) -> tuple[int, int, int]:
    """Rows at 0 / +m / −m, sequential: each metric read (a) on exactly the seeds the sweep ran (its stop look) and
    (b) with 1 or 2 more (speculative seeds started before the look was complete; at most ``MAX_SEEDS``).
    Returns the (row, metric, sweep) readings whose verdict, Δ or interval differ, the readings, and the rows with a
    speculative seed."""
    design = designs()["sequential 3→10"]
    _, _, (base, rows, judged) = family(rng, sims, rho, AT_MARGIN, design)
    differ = readings = spared = 0
    for row, (stop, js) in zip(rows, judged):
        more = np.minimum(stop + rng.choice(extra, sims), MAX_SEEDS)
        spared += int(np.sum(more > stop))
        for m in METRICS:
            a = js[m.name]
            b = read(base[m.name], row[m.name], more, design.judging(m), m.goal)
            same = (a.verdict == b.verdict) & (a.look == b.look)
            for f in ("diff", "lo", "hi"):
                same &= (getattr(a, f) == getattr(b, f)) | (np.isnan(getattr(a, f)) & np.isnan(getattr(b, f)))
            differ += int(np.sum(~same))
            readings += sims
    return differ, readings, spared


def power(rng, sims: int, rho: float, delta: tuple[float, float], design: Design, metrics=METRICS):
    """One row (of ``design.rows``) improved by ``delta`` sds on (loss, BLEU), no margins: the chance each metric is
    called *better*, both are, and the row's mean seeds."""
    base, (row,) = draw(rng, sims, rho, [(-delta[0], delta[1])])
    stop, js = judge_row(base, row, design, [Judged(m.name, m.goal) for m in metrics])
    better = {name: j.verdict == V.BETTER for name, j in js.items()}
    return {**{k: v.mean() for k, v in better.items()}, "both": np.all(list(better.values()), axis=0).mean(),
            "seeds": stop.mean()}
