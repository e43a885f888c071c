"""Exit codes of ablate's commands, and which of them mean "stopped from outside": one owner for every command, the
sweep's pool and the cluster backends that read a run process's code.

A shell reports a process a signal ended as 128 + the signal's number (130 Ctrl-C, 143 SIGTERM); Python reports a
child killed by a signal as the negative signal number. A run stopped from outside, either way, saved what resumes it
(or had nothing to save yet): it is *interrupted*, not failed, and a relaunch resumes it.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_FAILED = 1  # a run failed, or something no check foresaw
EXIT_USAGE = 2  # bad input: one line names the key, the value and what is allowed
EXIT_LOCKED = 3  # another process is training the same run
EXIT_PIPE = 141  # the reader of the output went away (`... | head`)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # what stops a run from outside: Ctrl-C, a scheduler's preemption


def signal_exit(signum: int) -> int:
    """The exit code of a command a signal stopped, as a shell reports it: 128 + the signal (130, 143)."""
    return 128 + int(signum)


EXIT_INTERRUPTED = signal_exit(signal.SIGINT)  # 130: Ctrl-C
EXIT_TERMINATED = signal_exit(signal.SIGTERM)  # 143: SIGTERM
# Exit codes of a run stopped from outside: ablate's own (it caught the signal and saved its step), or the signal
# itself (it came before ablate could catch it). SIGKILL is not among them: that is the kernel's OOM killer most often.
INTERRUPTED_CODES = frozenset({*(signal_exit(s) for s in STOP_SIGNALS), *(-int(s) for s in STOP_SIGNALS)})


def interrupted(code: int) -> bool:
    """Whether a run process's exit code (negative: the signal that killed it) says it was stopped from outside."""
    return code in INTERRUPTED_CODES
