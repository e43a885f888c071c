"""A run's status: the one spelling of what ``result.json``'s ``status`` says, and of what a report calls a run that
has not written one yet.

``Status`` members are strings (``Status.FINISHED == "finished"``), so ``result.json`` holds the same words it
always did, a status read back from it compares equal to its member, and f-strings print the word.

    running       training now (written when a run starts)
    finished      trained to its last step
    failed        raised an error, or diverged (its error says which)
    stopped       ended early by hyperband (its STOP file): not an outcome of its variant
    interrupted   Ctrl-C, SIGTERM or a lost worker: a relaunch resumes it
    pending       planned, no result.json yet (a report's word; never written)
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """A run's status, as ``result.json`` spells it (Python 3.11's ``StrEnum``, which 3.10 lacks)."""

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    PENDING = "pending"

    __str__ = str.__str__  # "finished", not "Status.FINISHED"
    __format__ = str.__format__
    __hash__ = str.__hash__  # a plain "finished" finds its member in a set


SETTLED = (Status.FINISHED, Status.FAILED, Status.STOPPED)  # ended for good: a relaunch does not train it again
ENDED = (Status.FINISHED, Status.FAILED)  # an outcome of its variant (a stopped run is not one)
