"""``python -m ablate.cli``: the ``ablate`` command (what the sweep pool and DDP ranks run)."""

import sys

from ablate.runtime import die_with_parent, leave_signals

die_with_parent()  # a run a sweep started fresh: before the seconds of imports, so a sweep gone by then ends it
leave_signals()  # a run a Slurm job started: the time limit's SIGUSR2 is its wrapper's to take

from ablate.cli import main  # noqa: E402

sys.exit(main())
