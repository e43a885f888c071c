"""The steps of one run's life that every run goes through, written once: a solo run's callbacks
(:mod:`ablate.train.callbacks`) call them for their run, a seed array's callback (:mod:`ablate.train.members`) for each
of its members, so that the two cannot disagree about a run's STOP request, its ``progress.json``, its best
validation and ``best.ckpt``, how a non-finite loss fails it, or its throughput.

Each object is one run's; it knows nothing of Lightning: the callbacks read the trainer and hand it the values.
"""

from __future__ import annotations

import math
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

from ablate.runs.files import PROGRESS_FILE, STOP_FILE, best_checkpoint, read_json, write_atomic, write_json
from ablate.train.checkpoints import save_weights

# the reason a stop request gives when its STOP file is empty
STOPPED_BY_A_REQUEST = "stopped by a request"


class StopFile:
    """``<run_dir>/STOP``: a request (a sweep's early termination, hyperband's) that the run end gracefully; its text
    is the reason."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / STOP_FILE

    def requested(self) -> str | None:
        """The reason, when the file is there; None otherwise."""
        if not self.path.is_file():
            return None
        return self.path.read_text().strip() or STOPPED_BY_A_REQUEST

    def request(self, reason: str) -> None:
        """Ask the run to stop, giving ``reason`` (a request already there stands: its reason is the one kept)."""
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, reason + "\n")


class ProgressFile:
    """``<run_dir>/progress.json``: each validation metric's values so far, by step, rewritten after every validation.

    A sweep's pool reads it while the run trains (hyperband stops runs by it); a resumed run keeps the values of the
    steps it does not repeat (:meth:`resume`).
    """

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / PROGRESS_FILE
        self.history: dict[str, list[list[float]]] = {}

    def resume(self, step: int) -> None:
        """Start from what an earlier attempt logged up to ``step``, the step this attempt resumes from (0: none)."""
        earlier = read_json(self.path).get("history", {}) if self.path.is_file() else {}
        self.history = {k: [p for p in v if p[0] <= step] for k, v in earlier.items()}

    def record(self, step: int, values: Mapping[str, float]) -> None:
        """Add the validation at ``step`` (``values``: its ``val/*`` metrics) and write the file."""
        for key, value in values.items():
            self.history.setdefault(key, []).append([step, float(value)])
        write_json(self.path, {"step": step, "history": self.history})


class BestWeights:
    """A run's lowest ``val/loss`` so far (``value``; infinite: none yet), and ``checkpoints/best.ckpt``, the weights
    of the validation that gave it (:func:`ablate.train.checkpoints.save_weights`: what ``ablate evaluate`` reads by
    default). A value that is not finite is never the best (it fails the run: :func:`not_finite`), and a tie keeps the
    earlier step. ``value`` travels in the run's checkpoints, so a resumed run's best is that of all its attempts."""

    def __init__(self, run_dir: Path):
        self.path = best_checkpoint(run_dir)
        self.value = math.inf

    def offer(self, value: float, state_dict: Mapping[str, Any] | None, cfg: Any, step: int) -> None:
        """The validation at ``step`` scored ``value``: when it is the best, keep it and write ``state_dict`` (the
        model's weights; None: another process writes them, a DDP rank other than the first) as best.ckpt."""
        if math.isfinite(value) and value < self.value:
            self.value = value
            if state_dict is not None:
                save_weights(self.path, dict(state_dict), cfg, step)


def not_finite(metric: str, step: int, value: float | None = None) -> FloatingPointError:
    """The error that fails a run whose ``metric`` (``train/loss``, ``val/loss``) turned NaN or infinite at ``step``;
    ``value``: what it turned to, when it is known."""
    return FloatingPointError(f"{metric} is {'not finite' if value is None else value} at step {step}")


def failure(exc: BaseException) -> str:
    """What a run's ``result.json`` records as the ``error`` of a run that ``exc`` failed."""
    return f"{type(exc).__name__}: {exc}"


TRACEBACK_FRAMES = 8  # the innermost frames of a failed run's traceback that its result.json keeps


def trace(exc: BaseException | None = None) -> str:
    """What a run's ``result.json`` records as the ``traceback`` of a run that failed: the exception being handled,
    or ``exc``, raised here when it was not (a seed array's member, failed by the array's callback while the others
    train on)."""
    if exc is None:
        return traceback.format_exc(limit=TRACEBACK_FRAMES)
    try:
        raise exc
    except BaseException:
        return traceback.format_exc(limit=TRACEBACK_FRAMES)


class TrainClock:
    """The seconds a run spends training, validation excluded, over every attempt (``train_seconds`` is restored from
    a checkpoint), read in laps: each :meth:`lap` is the training time since the one before, the time a
    ``train/tokens_per_s`` is logged over."""

    def __init__(self) -> None:
        self.train_seconds = 0.0  # every lap's
        self._t0: float | None = None  # when training last resumed; None: paused
        self._held = 0.0  # this lap's seconds before its last pause

    def resume(self) -> None:
        """Training runs from now: it starts, or a validation ended."""
        self._t0 = time.perf_counter()

    def pause(self) -> None:
        """A validation starts: its time is not training's."""
        if self._t0 is not None:
            self._held += time.perf_counter() - self._t0
            self._t0 = None

    def running(self) -> float:
        """This lap's seconds so far."""
        return self._held + (time.perf_counter() - self._t0 if self._t0 is not None else 0.0)

    def lap(self) -> float:
        """End this lap (training goes on): its seconds, now counted in ``train_seconds``."""
        seconds = self.running()
        self.train_seconds += seconds
        self._held, self._t0 = 0.0, (time.perf_counter() if self._t0 is not None else None)
        return seconds


def tokens_per_s(tokens: float, seconds: float) -> float:
    """Real target tokens per second of training (0 before any time passed)."""
    return tokens / seconds if seconds > 0 else 0.0
