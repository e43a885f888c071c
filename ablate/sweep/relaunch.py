"""What a relaunch keeps besides the method and the ``decide`` block (:func:`ablate.sweep.launch.check_design`),
checked once its runs are planned (:func:`check_relaunch`): the family of contrasts its first launch judged, and the
identities of the runs that ended. A change of either is refused in one line, before anything is written, unless
``--change-design``.

- **The family is the design.** Every row's share of the family's error is 0.05 / (its size): a row added or removed
  on a relaunch would move the other rows' intervals and could flip a verdict between two reports of the same runs.
- **A run's id is its config's hash** (:mod:`ablate.sweep.plan`): a changed base override, base config file or
  ``imports`` gives every run a new id, so the runs that ended would silently train again under new ones. plan.json
  records the base row's resolved config (``base_config``), so that the refusal names the keys that changed.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from ablate.errors import ConfigError
from ablate.runs.files import config_changes, read_result
from ablate.runs.plan import PlanRecord
from ablate.runs.status import SETTLED
from ablate.sweep.plan import PlannedRun, base_config, factor_record, factorial_of, planned_of
from ablate.sweep.spec import Sweep


def check_relaunch(sweep: Sweep, sweep_dir: Path, runs: list[PlannedRun], old: PlanRecord | None) -> None:
    """A relaunch of the sweep in ``sweep_dir`` judges the family its first launch judged and trains no ended run
    again under a new id (``runs``: the runs planned now; ``old``: the plan the folder holds, None when it has no
    plan.json yet).

    Raises:
        ConfigError: either changed (:func:`check_family`, :func:`check_identities`).
    """
    if old is None or not (earlier := planned_of(old, sweep_dir)):
        return  # a new sweep, or one whose first launch planned nothing yet
    check_family(sweep, sweep_dir, old, earlier, runs)
    check_identities(sweep, sweep_dir, old, earlier, runs)


def check_family(sweep: Sweep, sweep_dir: Path, old: PlanRecord, earlier: list[PlannedRun],
                 runs: list[PlannedRun]) -> None:
    """A grid's relaunch judges the contrasts its first launch judged (its rows, its parameters' levels): the family
    sets every row's share of the error, so a row added or removed would move the verdicts of the others (random
    and bayes sweeps compare each draw with the base, their family grows as draws come).

    Raises:
        ConfigError: the contrasts differ, naming those added and removed.
    """
    if not sweep.search.factorial:
        return
    was = (old.design or {}).get("family")
    if not isinstance(was, list):  # a plan written before the family was recorded: its runs say what it was
        was = [c.label for c in factorial_of(earlier, list(old.factors)).family()]
    now = [c.label for c in factorial_of(runs, factor_record(sweep)).family()]
    added, removed = [c for c in now if c not in was], [c for c in was if c not in now]
    if added or removed:
        said = "; ".join(f"{what} {', '.join(names)}" for what, names in (("added", added), ("removed", removed))
                         if names)
        share = f"{sweep.design(len(was)).alpha:.0%}"
        raise ConfigError("rows", said, f"the family {sweep_dir} was first launched with "
                          f"({_count(len(was), 'comparison')} sharing the {share} error): a relaunch keeps it "
                          f"(--change-design re-judges every row at the new family size, {len(now)}; --out a new "
                          "folder starts a new sweep)", str(sweep.path))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def check_identities(sweep: Sweep, sweep_dir: Path, old: PlanRecord, earlier: list[PlannedRun],
                     runs: list[PlannedRun]) -> None:
    """A relaunch trains again no run that ended because its config changed: a run's id is its config's hash, so a
    changed base override, base config file or ``imports`` gives every run a new id, and the runs that ended would
    be trained again, silently, under new ones.

    Raises:
        ConfigError: a variant planned at the same seed has another id now and some of its runs ended, naming how
            many would train again and the keys that changed (from the base config plan.json records, else the
            rows' own values).
    """
    now = {(r.variant, r.seed): r for r in runs}
    moved = {}  # variant -> (its run in plan.json, its run now) at a seed both plan, when their ids differ
    for r in earlier:
        if (new := now.get((r.variant, r.seed))) is not None and new.id != r.id:
            moved.setdefault(r.variant, (r, new))
    ended = [r for r in earlier if r.variant in moved and
             (read_result(sweep_dir / r.run_dir) or {}).get("status") in SETTLED]
    if not ended:
        return
    key, changes = "base", []
    recorded, base = old.base_config, base_config(sweep)
    if isinstance(recorded, dict) and base is not None:
        changes = config_changes(OmegaConf.create(recorded), OmegaConf.create(base))
    if not changes:
        key = "rows"
        for r, new in moved.values():
            gone, came = [o for o in r.overrides if o not in new.overrides], [o for o in new.overrides
                                                                              if o not in r.overrides]
            if gone or came:
                changes.append(f"{r.variant}: {' '.join(gone) or '(none)'} -> {' '.join(came) or '(none)'}")
    if not changes:
        key, changes = "config", ["outside the sweep file (the base config's defaults, a module its imports register)"]
    said = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
    raise ConfigError(key, said, f"the configs the runs in {sweep_dir} were trained with: a run's id is its config's "
                      f"hash, so {_count(len(ended), 'run')} that ended (of {', '.join(moved)}) would train again "
                      "under new ids; a relaunch keeps them (--change-design trains them again under the new config; "
                      "--out a new folder starts a new sweep)", str(sweep.path))
