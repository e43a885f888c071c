"""``ablate sweep --dry-run``: the run matrix a sweep plans, as text (with what the report will compare and what
each variant changes against the base) or as JSON (``--json``)."""

from __future__ import annotations

import json
from collections import Counter

from ablate.sweep.plan import PlannedRun, base_variant, factor_record, factorial_of, plan_record
from ablate.sweep.spec import Sweep


def format_matrix(sweep: Sweep, runs: list[PlannedRun]) -> str:
    """The run matrix (one line per run: varied values, parameters, FLOPs per token), then what each variant
    changes in the built run against the base, matched budgets, and the variants that train the same model."""
    keys = list(runs[0].varied) if runs else []
    header = ["run", "variant", "seed", *keys, "params", "FLOPs/token"]
    rows = [[r.id, r.variant, str(r.seed), *(str(r.varied[k]) for k in keys), f"{r.parameters / 1e6:.3f}M",
             f"{r.flops_per_token:.3g}"] for r in runs]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    count = sweep.search.count(sweep, runs)
    if sweep.decide.max_seeds:
        n = sweep.decide.max_seeds
        count += (f" to start (sequential design: a seed at a time to undecided rows, up to {n} seeds each, "
                  f"{sweep.decide.most_runs(len({r.variant for r in runs}))} runs at most)")
    metric = sweep.metric
    title = f"sweep {sweep.name}: {count}, method {sweep.method}, metric {metric['name']} ({metric['goal']})"
    if len(sweep.judged) > 1:
        judged = ", ".join(f"{j.name} ({j.goal}{f', margin {j.margin}' if j.margin else ''})" for j in sweep.judged)
        title += f"; every row judged on {judged}, the family's error shared over rows x {len(sweep.judged)} metrics"
    fresh = [r for r in runs if r.fresh_seed]
    notes = [f"{len(fresh)} runs repeat an earlier draw (W&B runs every draw): each with the next seed its variant "
             f"had not used ({', '.join(f'{r.variant}: seed {r.seed}' for r in fresh[:3])}"
             f"{', ...' if len(fresh) > 3 else ''})", ""] if fresh else []
    return "\n".join([title, *lines, "", *notes, *family_note(sweep, runs), *variant_notes(runs)])


def family_note(sweep: Sweep, runs: list[PlannedRun]) -> list[str]:
    """What the report will compare, when the design crosses factors: the family's contrasts by kind."""
    factorial = factorial_of(runs, factor_record(sweep))
    if len(factorial.factors) < 2:
        return []
    counts = Counter(c.kind for c in factorial.family())
    names = {"simple": "row"}  # a simple contrast is a row of the table: a row against its stratum's base
    kinds = ", ".join(f"{n} {names.get(kind, kind)}{'s' * (n > 1)}" for kind, n in counts.items())
    missing = f"; no base row at {', '.join(factorial.missing)}: its rows are not compared" if factorial.missing else ""
    others = ", ".join(f.name for f in factorial.factors if f.name != "row")
    return [f"comparisons: {sum(counts.values())} in one family ({kinds}); each row against the base row at the same "
            f"{others}{missing}", ""]


def plan_json(sweep: Sweep, runs: list[PlannedRun]) -> str:
    """``--dry-run --json``: the plan as plan.json would hold it, with how many runs the sweep makes (``runs``
    null: open-ended, ``planned`` then lists its first points) and ablate's notes on the file."""
    record = {**plan_record(sweep, runs), "open_ended": sweep.open_ended,
              "total_runs": sweep.search.total_runs(sweep, runs), "notes": sweep.notes()}
    return json.dumps(record, indent=2, default=str)


def variant_notes(runs: list[PlannedRun]) -> list[str]:
    """Per variant, against the base: parameters, matched budget, changed modules and settings; twins flagged."""
    variants = {r.variant: r for r in reversed(runs)}  # the first run of each variant
    base = base_variant(runs)
    out = [f"what each variant changes in the built run, against {base!r}:"]
    base_params = variants[base].parameters if base in variants else None
    for name, r in reversed(list(variants.items())):
        delta = (f" ({(r.parameters - base_params) / base_params:+.2%})"
                 if base_params and r.parameters != base_params else "")
        parts = [f"{r.parameters / 1e6:.3f}M params{delta}"]
        if r.matched:
            m = r.matched
            parts.append(f"matched {m['budget']}: {m['by']}={m['value']} gives {m['achieved']:.6g} for the base's "
                         f"{m['target']:.6g} ({m['error']:+.2%})")
        if r.leaks_labels:
            parts.append("its mask leaks labels (every position scored): losses not comparable")
        if r.same_as:
            parts.append(f"SAME MODEL AND TRAINING AS {r.same_as!r}: it differs only in keys that change nothing")
        elif name != base and not r.changes and not r.matched:
            parts.append("no change to the model or its training besides the seed")
        out.append(f"  {name}: " + "; ".join(parts + r.changes))
    return out
