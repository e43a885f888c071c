"""Which of a sweep's runs train together as seed arrays (:mod:`ablate.train.array`), and how many members each.

A run's seeds fuse with the other seeds of its variant (the same config but the seed) when its variant fuses
(:func:`ablate.train.fusable.why_not_fused`) and the run asks for it: ``trainer.fuse`` true; false keeps it alone;
null (the default) follows the pool's ``--fuse``:

- ``auto`` (the default): on a GPU, as many members per array as the GPU's share of free memory holds at the run's
  memory estimate (:mod:`ablate.sweep.memory`), at most :data:`MAX_MEMBERS`; on a CPU, every run alone: a fused
  step there costs what its members' solo steps cost (``benchmarks/fuse.py``), and two workers already fill the
  cores.
- ``on``: fused wherever the variant fuses, :data:`MAX_MEMBERS` at most (or the GPU's share, on a GPU);
  ``off``: every run alone, one process each; ``N``: at most N members.

Which runs share an array is decided once, when they are first queued together (the plan's runs at the first
launch; the seeds a look of the sequential design adds, as new arrays), and recorded in ``<sweep_dir>/arrays.json``
before any of them starts. A relaunch, with any ``--workers`` or ``--fuse``, trains the same arrays: an array's
members differ from the same seeds in another grouping (their dropout masks), and a killed array resumes only from
its own checkpoint. The dry run shows the grouping the launch will record (:func:`plan_groups`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from omegaconf import DictConfig

from ablate.errors import ConfigError
from ablate.runs.files import read_json, variant_hash, write_json
from ablate.runs.sweep_folder import ARRAYS_FILE
from ablate.sweep.plan import PlannedRun
from ablate.sweep.queue import RunQueue
from ablate.sweep.slots import AUTO

MAX_MEMBERS = 16
# Processes per GPU when seeds fuse and --runs-per-gpu is auto: two, so that one computes while the other does its
# host work (batches, validation, records); each array then takes half the GPU's memory. Not yet measured on a GPU
# (benchmarks/fuse.py --device cuda and benchmarks/gpu.py --sweep are the measurements to take).
ARRAYS_PER_GPU = 2
SETTINGS = "auto, on, off or a number of members"


@dataclass(frozen=True)
class Fusing:
    """The pool's rule: at most ``members`` per array for runs that leave it to the pool; ``why``: how it was
    decided; ``most``: the cap for runs that ask to be fused."""

    members: int
    most: int
    why: str

    def members_for(self, cfg: DictConfig, fuses: bool) -> int:
        """The most members an array of ``cfg``'s run may have (1: it trains alone)."""
        asked = cfg.trainer.get("fuse")
        if not fuses or asked is False:
            return 1
        return self.most if asked is True else self.members


def processes_per_gpu(runs_per_gpu: str | int, setting: str | int, gpus: Sequence[Any]) -> str | int:
    """``--runs-per-gpu`` as the pool uses it: ``auto`` with seeds that may fuse on a GPU is :data:`ARRAYS_PER_GPU`
    processes (their arrays fill the memory); otherwise as given (``auto``: as many solo runs as fit)."""
    if runs_per_gpu == AUTO and gpus and str(setting) != "off":
        return ARRAYS_PER_GPU
    return runs_per_gpu


def fusing(setting: str | int, *, gpus: Sequence[Any], slots_per_gpu: int = 1, run_bytes: int | None = None) -> Fusing:
    """The pool's rule from ``--fuse`` (:data:`SETTINGS`) and the machine.

    Raises:
        ValueError: ``setting`` is none of :data:`SETTINGS` (the CLI names it).
    """
    text = str(setting)
    if text.isdigit() and int(text) >= 1:
        n = min(int(text), MAX_MEMBERS)
        return Fusing(n, n, f"--fuse {text}: at most {n} seeds of a variant in one array")
    if text not in ("auto", "on", "off"):
        raise ValueError(f"--fuse {text!r}: expected {SETTINGS}")
    fit = MAX_MEMBERS
    if gpus and run_bytes:
        share = min(g.free for g in gpus) // max(1, slots_per_gpu)
        fit = int(max(1, min(MAX_MEMBERS, share // run_bytes)))
    where = f"a GPU's share of free memory holds {fit}" if gpus else "on this CPU"
    if text == "off":
        return Fusing(1, 1, "--fuse off: every run alone")
    if text == "on" or gpus:
        return Fusing(fit, fit, f"seeds of a variant fused, up to {fit} an array ({where})")
    return Fusing(1, fit, "every run alone on a CPU (a fused step costs its members' solo steps there: "
                          "benchmarks/fuse.py); --fuse on, or trainer.fuse=true, fuses them")


def describe_sizes(sizes: list[int]) -> str:
    """How a variant's seeds train, from its arrays' sizes (1: a seed alone): ``fused, 2 arrays of 3 + 2 seeds``."""
    arrays = sorted((n for n in sizes if n > 1), reverse=True)
    alone = len(sizes) - len(arrays)
    parts = [f"fused, {len(arrays)} array{'s' if len(arrays) > 1 else ''} of {' + '.join(map(str, arrays))} seeds"] \
        if arrays else []
    parts += [f"{alone} seed{'s' if alone > 1 else ''} alone"] if alone else []
    return "; ".join(parts)


def seeds_note(groups: list[list[PlannedRun]], rule: Fusing, config_of: Callable[[Any], DictConfig],
               later_looks: bool = False) -> list[str]:
    """The dry run's word on how each variant's seeds will run: the arrays the launch trains (``groups``: each
    array's runs, as :func:`seed_arrays` records them; a run alone is a group of one), and why a variant that does
    not fuse trains alone (``config_of(run)``: the run's validated config)."""
    from ablate.train.fusable import why_not_fused

    sizes: dict[str, list[int]] = {}
    first: dict[str, Any] = {}
    for group in groups:
        first.setdefault(group[0].variant, group[0])
        sizes.setdefault(group[0].variant, []).append(len(group))
    lines = [f"how seeds train: {rule.why}"]
    for variant, run in first.items():
        cfg = config_of(run)
        why = why_not_fused(cfg)
        if most_members(cfg, rule) > 1 or max(sizes[variant]) > 1:  # a relaunch resumes recorded arrays anyway
            how = describe_sizes(sizes[variant])
        elif why:
            how = f"alone: it does not fuse ({why})"
        else:
            how = "alone" + (" (trainer.fuse: false)" if cfg.trainer.fuse is False else "")
        lines.append(f"  {variant}: {how}")
    if later_looks:
        lines.append("  the seeds a later look adds: arrays of their own, grouped by the same rule when it adds them")
    return lines




def read_groups(sweep_dir: Path) -> dict[str, tuple[str, ...]]:
    """Run id -> the ids of the members of its array, as an earlier launch recorded them ({} when none did).

    Raises:
        ConfigError: the file is not as ablate writes it, naming it.
    """
    path = Path(sweep_dir) / ARRAYS_FILE
    if not path.is_file():
        return {}
    data = read_json(path)
    arrays = data.get("arrays") if isinstance(data, dict) else None
    if not isinstance(arrays, list) or not all(isinstance(a, list) and a and all(isinstance(i, str) for i in a)
                                               for a in arrays):
        raise ConfigError("file", str(path), "a sweep's seed arrays as ablate writes them (a list of lists of run "
                          "ids): restore it, or delete it only if no array of this sweep has started")
    return {run_id: tuple(ids) for ids in arrays for run_id in ids}


def write_groups(sweep_dir: Path, groups: dict[str, tuple[str, ...]]) -> None:
    """Record every array's members (atomically)."""
    arrays = list(dict.fromkeys(groups.values()))
    write_json(Path(sweep_dir) / ARRAYS_FILE, {"arrays": [list(a) for a in arrays]})


def most_members(cfg: DictConfig, rule: Fusing) -> int:
    """The most members an array of ``cfg``'s run may have under ``rule`` (1: it trains alone)."""
    from ablate.train.fusable import why_not_fused

    return rule.members_for(cfg, why_not_fused(cfg) is None)


def plan_groups(runs: Sequence[PlannedRun], config_of: Callable[[PlannedRun], DictConfig], rule: Fusing,
                n_slots: int) -> list[list[PlannedRun]]:
    """The arrays of ``runs`` (queued together, in queue order), each a list of runs (one run: it trains alone).

    The slots are shared out over the variants queued: each variant's seeds are split into ``n_slots // variants``
    arrays (at least one), as even as they go, at most its rule's members an array (ten seeds of one variant and two
    workers: two arrays of five, not one of ten beside an idle worker; two variants and two workers: an array each).
    """
    variant = {r.id: variant_hash(config_of(r)) for r in runs}
    most = {r.id: most_members(config_of(r), rule) for r in runs}
    counts: dict[str, int] = {}
    for run in runs:
        counts[variant[run.id]] = counts.get(variant[run.id], 0) + 1
    arrays = max(1, n_slots // max(1, len(counts)))
    waiting, groups = list(runs), []
    while waiting:
        run = waiting.pop(0)
        mine = variant[run.id]
        size = min(most[run.id], -(-counts[mine] // arrays))  # ceil: the arrays as even as they go
        group = [run, *[r for r in waiting if variant[r.id] == mine][:size - 1]]
        waiting = [r for r in waiting if r not in group]
        groups.append(group)
    return groups


Arrays = Callable[[PlannedRun], tuple[list[PlannedRun], list[PlannedRun]]]  # run -> (its array, taken from the queue)


def seed_arrays(queue: RunQueue, config_of: Callable[[PlannedRun], DictConfig], rule: Fusing, n_slots: int,
                sweep_dir: Path, *, record: bool = True) -> Arrays:
    """``run`` -> (the runs of its array in their recorded order, itself alone when it trains alone; those of them
    taken from the queue now).

    A run no launch has grouped yet is grouped with every other ungrouped run waiting in the queue
    (:func:`plan_groups`), and the grouping is recorded before the run starts; a grouped run gets its recorded
    array, whatever waits now. The members the queue no longer holds (they ended in an earlier attempt of their
    array) are in the first list only: the array resumes with them, and only the runs taken from the queue are reported.
    """
    groups = read_groups(sweep_dir)

    def members(run: PlannedRun) -> tuple[list[PlannedRun], list[PlannedRun]]:
        if run.id not in groups and most_members(config_of(run), rule) > 1:
            fresh = [run, *(r for r in queue.todo if r.id not in groups)]
            for group in plan_groups(fresh, config_of, rule, n_slots):
                if len(group) > 1 or most_members(config_of(group[0]), rule) > 1:  # a fusing variant's: recorded
                    groups.update({r.id: tuple(g.id for g in group) for r in group})
            if record:
                write_groups(sweep_dir, groups)
        ids = groups.get(run.id, (run.id,))
        taken = [run, *queue.take(lambda other: other.id in ids and other.id != run.id, len(ids))]
        by_id = {r.id: r for r in queue.runs}
        return [by_id[i] if i in by_id else run for i in ids], taken

    return members


def arrays_of(todo: list[PlannedRun], runs: list[PlannedRun], config_of: Callable[[PlannedRun], DictConfig],
              rule: Fusing, n_slots: int, sweep_dir: Path) -> list[list[PlannedRun]]:
    """The arrays a launch trains ``todo`` (the runs it will queue, in order; ``runs``: all planned) as, each a list of
    runs: what :func:`seed_arrays` will hand out, read from the record where an earlier launch made one, without
    recording anything (the dry run)."""
    queue = RunQueue.__new__(RunQueue)
    queue.todo, queue.runs, queue.closed = deque(todo), runs, None
    members = seed_arrays(queue, config_of, rule, n_slots, sweep_dir, record=False)
    arrays = []
    while queue.todo:
        arrays.append(members(queue.todo.popleft())[0])
    return arrays
