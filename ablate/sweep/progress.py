"""What a sweep's pool says about its progress: a note when it starts (what it will train, what a relaunch
resumes or that nothing was left), the progress line of a sequential sweep, whose plan grows look by look, and where
it is drawn: tqdm's bar on a terminal, a line per run that ends in a log file (:func:`progress_bar`).

A bar's total and percentage would move backwards each time a look adds seeds (12 runs, then 16, ... 32), and a
time left from every run so far would not know that. So the line says where the design stands and what is known:

    look at 4 seeds: 14/16 runs done (40 at most) · 1 of 3 decided · about 1m 05s left at this look

- the look: the most seeds a variant has planned;
- runs ended (finished or failed, earlier launches included) / runs planned now, and the most the design may train;
- the contrasts decided at their last complete look (each row against its base, and a factorial's effects);
- the time left at this look: the mean wall time of this look's runs that ended in this launch, for each round of
  ``workers`` runs still to end at this look; unknown until one has ended.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from pathlib import Path

import sys
from typing import Any, TextIO

from tqdm import tqdm

from ablate.formats import format_duration
from ablate.runs.files import last_checkpoint, read_result
from ablate.runs.status import Status
from ablate.sweep.plan import PlannedRun
from ablate.sweep.queue import Look


def time_left(look: Look, ended: set[str], seconds: dict[str, float], workers: int) -> float | None:
    """Seconds until this look's runs have ended: the mean of ``seconds`` (this look's runs that ended in this
    launch) for each round of ``workers`` runs left; None before one has ended.

    Args:
        look: the current look.
        ended: every run that has ended (ids).
        seconds: wall seconds of the runs that ended in this launch (ids).
        workers: the runs that train at once.
    """
    timed = [seconds[r] for r in look.runs if r in seconds]
    if not timed:
        return None
    left = len(look.runs - ended)
    return statistics.fmean(timed) * math.ceil(left / max(1, workers))


def look_line(look: Look, ended: set[str], seconds: dict[str, float], workers: int) -> str:
    """The progress line (see the module's docstring)."""
    left = time_left(look, ended, seconds, workers)
    if not look.runs - ended:
        when = "this look's runs have ended"
    elif left is None:
        when = "time left: once a run of this look has ended"
    else:
        when = f"about {format_duration(left)} left at this look"
    return (f"look at {look.seeds} seeds: {len(ended)}/{look.planned} runs done ({look.most} at most) · "
            f"{look.decided} of {look.contrasts} decided · {when}")


def start_note(name: str, runs: list[PlannedRun], todo: list[PlannedRun], sweep_dir: Path, most: int | None) -> str:
    """One line before a sweep trains: the runs to start (and the most a sequential design may train); on a relaunch,
    the runs earlier launches ended, by status, and how many of those to train resume from their last checkpoint;
    or that nothing is left to train.

    Args:
        name: the sweep's name.
        runs: every run planned now; todo: those to train in this launch.
        sweep_dir: the sweep directory (its runs' result.json and checkpoints).
        most: the runs a sequential design trains at most; None for a fixed plan.
    """
    to_do = {r.id for r in todo}
    earlier = Counter((read_result(sweep_dir / r.run_dir) or {}).get("status") for r in runs if r.id not in to_do)
    resumed = sum((last_checkpoint(sweep_dir / r.run_dir)).is_file() for r in todo)
    at_most = f", {most} at most (a seed at a time to the rows still undecided)" if most else ""
    if not earlier:
        return f"ablate: sweep {name}: {len(todo)} runs to start{at_most}"
    counts = ", ".join(f"{n} {status}" for status, n in earlier.most_common())
    retry = " (--retry-failed trains the failed ones again)" if earlier.get(Status.FAILED) else ""
    if not todo:
        return f"ablate: sweep {name}: nothing left to train: its {len(runs)} runs ended in earlier launches " \
               f"({counts}){retry}"
    again = f", {resumed} of them from their last checkpoint" if resumed else ""
    return (f"ablate: sweep {name}: {sum(earlier.values())} of {len(runs)} runs ended in earlier launches "
            f"({counts}){retry}; {len(todo)} to train{again}{at_most}")


class LogLines:
    """The sweep's progress off a terminal (a log file, a pipe): a line per update, each once, ending in a newline.

    tqdm off a terminal writes each redraw after a carriage return, so a log file held one line of every redraw
    joined by ``\\r``, each update drawn twice (its description, then its count). This draws nothing until
    :meth:`update`, then one line: the description, the runs ended of the total, the time since the sweep started,
    the counts (``done=3, stopped=0, failed=0``). It takes tqdm's calls that the pool makes.
    """

    def __init__(self, total: int | None, initial: int, desc: str, stream: TextIO, bar_format: str | None = None):
        self.total, self.n, self.desc, self.stream = total, initial, desc, stream
        self.alone = bar_format == "{desc}"  # the description says it all (a sequential design's look line)
        self.postfix: dict[str, Any] = {}
        self.start = time.monotonic()

    def set_description_str(self, desc: str, refresh: bool = True) -> None:
        self.desc = desc

    def set_postfix(self, refresh: bool = True, **counts: Any) -> None:
        self.postfix = counts

    def update(self, n: int = 1) -> None:
        self.n += n
        print(self.line(), file=self.stream, flush=True)

    def line(self) -> str:
        """``sweep: 3/9 runs [00:37] done=3, stopped=0, failed=0`` (the time since the sweep started); a look line
        as it is (it says the time left)."""
        if self.alone:
            return self.desc
        elapsed = f"[{tqdm.format_interval(time.monotonic() - self.start)}]"
        counts = ", ".join(f"{k}={v}" for k, v in self.postfix.items())
        return " ".join(filter(None, (f"{self.desc}: {self.n}/{self.total or '?'} runs", elapsed, counts)))

    def close(self) -> None:
        pass


def progress_bar(*, total: int | None, initial: int, desc: str, disable: bool, stream: TextIO | None = None,
                 **options: Any) -> tqdm | LogLines:
    """The pool's progress: tqdm's bar on a terminal, :class:`LogLines` off one, tqdm disabled with ``disable``.
    The pool updates it with ``refresh=False`` and then :meth:`update`, so a terminal's bar is drawn once an update
    too."""
    stream = sys.stderr if stream is None else stream  # at the call: a caller may have replaced it
    if disable or stream.isatty():
        return tqdm(total=total, initial=initial, desc=desc, unit="run", disable=disable, file=stream, **options)
    return LogLines(total, initial, desc, stream, options.get("bar_format"))
