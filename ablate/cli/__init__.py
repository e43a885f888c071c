"""The ``ablate`` command: train, describe, components, sweep, report, sync, agent, evaluate, generate, attention.

Bad input is one line on stderr and exit code 2, before anything is written; options and ``key=value``
overrides may come in any order. An unexpected error is one line too (exit 1); ``ABLATE_TRACEBACK=1``
shows its traceback.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Sequence

from ablate.cli.parser import UsageError, parse
from ablate.cli.run import cmd_components, cmd_describe, cmd_train, cmd_train_array
from ablate.cli.sweep import cmd_agent, cmd_report, cmd_sweep, cmd_sync
from ablate.errors import ConfigError
from ablate.runs.lock import EXIT_LOCKED, RunLocked
from ablate.train.signals import Interrupted
from ablate.evaluate.cli import cmd_attention, cmd_evaluate, cmd_generate

COMMANDS = {"train": cmd_train, "train-array": cmd_train_array, "describe": cmd_describe, "sweep": cmd_sweep,
            "report": cmd_report, "sync": cmd_sync, "agent": cmd_agent, "evaluate": cmd_evaluate,
            "generate": cmd_generate, "attention": cmd_attention, "components": cmd_components}
HEAVY = {"train", "train-array", "sweep", "evaluate", "agent"}  # commands that train or decode: worth a fast allocator


def _run(args) -> int:
    """The command's exit code; a ``sys.exit()`` inside it (a user's module, a library) is no success."""
    try:
        return args.func(args)
    except SystemExit as exc:  # a subclass is a library's own signal (Lightning's SIGTERM): it keeps its meaning
        if type(exc) is not SystemExit or exc.code not in (0, None):
            raise
        raise RuntimeError(f"something the command ran called sys.exit({exc.code!r}) before it was done") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (2 for bad input)."""
    if argv is None and len(sys.argv) > 1 and sys.argv[1] in HEAVY:  # a real command line, not a caller's list
        from ablate.runtime import apply_fast_allocator

        apply_fast_allocator(sys.argv[1:])
    try:
        args = parse(sys.argv[1:] if argv is None else argv, COMMANDS)
        return 0 if args is None else _run(args)
    except (ConfigError, UsageError) as err:
        print(f"ablate: error: {err}", file=sys.stderr)
        return 2
    except RunLocked as locked:  # another process trains this run: exit 3, which a sweep's pool tells apart
        print(f"ablate: error: {locked}", file=sys.stderr)
        return EXIT_LOCKED
    except KeyboardInterrupt:
        print("ablate: interrupted", file=sys.stderr)
        return 130
    except Interrupted as stopped:  # a run stopped by SIGINT or SIGTERM inside another command (a W&B agent's)
        print(f"ablate: {stopped}", file=sys.stderr)
        return stopped.exit_code
    except BrokenPipeError:  # the reader went away (`ablate sweep ... --dry-run | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not raise again
        return 141
    except Exception as exc:  # a bug, or something no check foresaw: still one line, the traceback on request
        if os.environ.get("ABLATE_TRACEBACK"):
            traceback.print_exc()
        print(f"ablate: internal error: {type(exc).__name__}: {' '.join(str(exc).split())} "
              "(set ABLATE_TRACEBACK=1 to see where)", file=sys.stderr)
        return 1
