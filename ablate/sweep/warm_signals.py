"""Imported first by the warm server (:data:`ablate.sweep.warm.PRELOAD`), and acting only there: the server ignores
Ctrl-C while it imports torch, Lightning and wandb, as multiprocessing's forkserver does once it serves.

Ctrl-C reaches every process of the terminal's process group, the server included: while it imported, each Ctrl-C
early in a sweep printed the server's 40-line KeyboardInterrupt traceback above the sweep's one line. The server exits
with the sweep process anyway; each run forked from it takes Ctrl-C again (:func:`ablate.sweep.warm.settle`).
"""

from __future__ import annotations

import signal
import sys

if sys.argv[:1] == ["-c"] and "multiprocessing.forkserver" in sys.modules:  # the server, not an importer's process
    signal.signal(signal.SIGINT, signal.SIG_IGN)
