"""``python -m ablate.cli``: the ``ablate`` command (what the sweep pool and DDP ranks run)."""

import sys

from ablate.cli import main

sys.exit(main())
