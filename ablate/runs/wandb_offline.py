"""The offline W&B folders ablate writes, and whether the W&B server can be reached: what ``ablate sync`` uploads.

Offline, every ``wandb.init`` writes a folder ``offline-run-<time>-<id>`` under a run's ``wandb/`` (a training
attempt, or the scores ``ablate evaluate`` adds) or a report's. A resumed run's last training folder holds its whole
history and lists the earlier ones in ``wandb/ablate-superseded`` (:class:`ablate.runs.wandb._RunLogger`): they are
never uploaded.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

SUPERSEDED_FILE = Path("wandb") / "ablate-superseded"  # offline segments a later one holds whole: never uploaded
CONNECT_TIMEOUT = 5.0  # seconds ablate sync waits for the W&B server to answer before it says the network is down


def offline_folders(wandb_dir: Path, run: str) -> list[Path]:
    """The offline folders of W&B run ``run`` under ``wandb_dir`` (``offline-run-<time>-<id>``), oldest first."""
    return sorted(Path(wandb_dir).glob(f"offline-run-*-{run}"), key=lambda f: f.name)


def _superseded(folder: Path) -> bool:
    """Whether a later offline folder of the same run holds this one's history whole (what
    :class:`ablate.runs.wandb._RunLogger` lists)."""
    listed = folder.parent.parent / SUPERSEDED_FILE
    return listed.is_file() and folder.name in listed.read_text().split()


def offline_runs(paths: list[Path]) -> list[Path]:
    """The ``offline-run-*`` folders under ``paths`` (searched recursively) with a ``.wandb`` file not
    yet uploaded (no ``.wandb.synced`` marker beside it) and not superseded by a resumed attempt's, oldest first."""
    found: set[Path] = set()
    for path in map(Path, paths):
        found.update(run for run in [path, *path.rglob("offline-run-*")]
                     if run.name.startswith("offline-run-") and run.is_dir())
    pending = [run for run in found if any(not Path(f"{f}.synced").exists() for f in run.glob("*.wandb"))
               and not _superseded(run)]
    return sorted(pending, key=lambda run: (run.name, str(run)))  # the name starts with the start time


def server_unreachable(timeout: float = CONNECT_TIMEOUT) -> str | None:
    """Why the W&B server (``WANDB_BASE_URL``, or ``wandb login --host``'s) cannot be reached, in words; None when a
    connection to it opens within ``timeout`` seconds. Nothing is sent."""
    from wandb.sdk import wandb_setup

    url = urlsplit(os.environ.get("WANDB_BASE_URL") or wandb_setup.singleton().settings.base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    failed: list[OSError] = []

    def connect() -> None:
        try:
            socket.create_connection((url.hostname, port), timeout=timeout).close()
        except OSError as exc:
            failed.append(exc)

    # In a thread of its own: the name's lookup is not bound by the socket's timeout (a resolver that cannot be
    # reached is asked again and again), and the deadline holds for the lookup and the connection together.
    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(timeout)
    if probe.is_alive() or failed:
        why = "timed out" if probe.is_alive() or isinstance(failed[0], TimeoutError) else (
            failed[0].strerror or str(failed[0]))
        return f"{url.scheme}://{url.netloc} cannot be reached ({why})"
    return None
