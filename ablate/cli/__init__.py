"""The ``ablate`` command: train, describe, components, sweep, report, sync, agent, evaluate, generate, attention.

Bad input is one line on stderr and exit code 2, before anything is written; options and ``key=value``
overrides may come in any order. An unexpected error is one line too (exit 1); ``ABLATE_TRACEBACK=1``
shows its traceback.
"""

from __future__ import annotations

import sys
from typing import Sequence

from ablate.cli.parser import parse
from ablate.cli.run import cmd_components, cmd_describe, cmd_train, cmd_train_array
from ablate.cli.sweep import cmd_agent, cmd_report, cmd_status, cmd_sweep, cmd_sync
from ablate.entry import guarded, run_command
from ablate.evaluate.cli import cmd_attention, cmd_evaluate, cmd_generate

COMMANDS = {"train": cmd_train, "train-array": cmd_train_array, "describe": cmd_describe, "sweep": cmd_sweep,
            "report": cmd_report, "status": cmd_status, "sync": cmd_sync, "agent": cmd_agent, "evaluate": cmd_evaluate,
            "generate": cmd_generate, "attention": cmd_attention, "components": cmd_components}
HEAVY = {"train", "train-array", "sweep", "evaluate", "agent"}  # commands that train or decode: worth a fast allocator


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (2 for bad input: :func:`ablate.entry.guarded`)."""
    if argv is None and len(sys.argv) > 1 and sys.argv[1] in HEAVY:  # a real command line, not a caller's list
        from ablate.runtime import apply_fast_allocator

        apply_fast_allocator(sys.argv[1:])

    def command() -> int:
        args = parse(sys.argv[1:] if argv is None else argv, COMMANDS)
        return 0 if args is None else run_command(args)

    return guarded(command)
