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

An array takes the runs of its variant that are waiting in the queue when a worker is free: the seeds a look of the
sequential design adds run as a new array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from omegaconf import DictConfig

from ablate.runs.files import variant_hash
from ablate.sweep.plan import PlannedRun
from ablate.sweep.queue import RunQueue

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
    if runs_per_gpu == "auto" and gpus and str(setting) != "off":
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


def seeds_note(runs: list, rule: Fusing, config_of: Callable[[Any], DictConfig]) -> list[str]:
    """The dry run's word on how each variant's seeds will run: fused (how many an array at most) or alone, and why
    (``config_of(run)``: the run's validated config)."""
    from ablate.train.fusable import why_not_fused

    first: dict[str, Any] = {}
    seeds: dict[str, int] = {}
    for run in runs:
        first.setdefault(run.variant, run)
        seeds[run.variant] = seeds.get(run.variant, 0) + 1
    lines = [f"how seeds train: {rule.why}"]
    for variant, run in first.items():
        cfg = config_of(run)
        why = why_not_fused(cfg)
        most = rule.members_for(cfg, why is None)
        if most > 1:
            how = f"fused, {min(most, seeds[variant])} seeds an array" + (" (trainer.fuse)" if cfg.trainer.fuse
                                                                            else "")
        elif why:
            how = f"alone: it does not fuse ({why})"
        else:
            how = "alone" + (" (trainer.fuse: false)" if cfg.trainer.fuse is False else "")
        lines.append(f"  {variant}: {how}")
    return lines


def seed_arrays(queue: RunQueue, config_of: Callable[[PlannedRun], DictConfig], rule: Fusing,
                n_slots: int) -> Callable[[PlannedRun], list[PlannedRun]]:
    """``run`` -> the runs that train with it: itself, and the seeds of its variant waiting in the queue when it
    fuses (``config_of(run)``: its config). A variant's waiting seeds are split into as many arrays as there are slots
    its variant does not need to share with the other variants waiting (ten seeds of one variant and two workers: two
    arrays of five, not one of ten beside an idle worker; four variants and two workers: an array each)."""
    from ablate.train.fusable import why_not_fused

    variants: dict[str, str] = {}
    chunks: dict[str, int] = {}  # a variant's array size, fixed when its seeds are first split

    def variant(run: PlannedRun) -> str:
        if run.id not in variants:
            variants[run.id] = variant_hash(config_of(run))
        return variants[run.id]

    def members(run: PlannedRun) -> list[PlannedRun]:
        cfg = config_of(run)
        most = rule.members_for(cfg, why_not_fused(cfg) is None)
        if most == 1:
            return [run]
        mine = variant(run)
        if mine not in chunks:
            waiting = [variant(r) for r in queue.todo]
            arrays = max(1, n_slots - len(set(waiting) - {mine}))
            chunks[mine] = -(-(1 + waiting.count(mine)) // arrays)  # ceil
        group = [run, *queue.take(lambda other: variant(other) == mine, min(most, chunks[mine]) - 1)]
        if not any(variant(r) == mine for r in queue.todo):
            del chunks[mine]  # the next look's seeds are split afresh
        return group

    return members
