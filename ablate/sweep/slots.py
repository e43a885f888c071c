"""Where the local pool's runs train: one slot per run that may train at once, each with its GPU and its threads.

One worker per GPU, pinned with CUDA_VISIBLE_DEVICES (or several per GPU: ``--runs-per-gpu``); on a CPU, ``workers``
processes sharing the cores, OMP_NUM_THREADS = cores / workers each, so that they do not fight over them (two
processes that each take every core of a 2-core machine slow each other 10-20x).
"""

from __future__ import annotations

from dataclasses import dataclass

from ablate.train.threads import usable_cores

AUTO = "auto"  # --runs-per-gpu auto: as many runs on a GPU as its free memory holds (seed arrays: ablate.sweep.arrays)
RUNS_PER_GPU = AUTO  # --runs-per-gpu's default: the CLI's and launch()'s
MAX_PER_GPU = 16  # runs-per-gpu auto never packs more than this many runs on one GPU


@dataclass(frozen=True)
class Gpu:
    """One visible GPU: its index and free memory (bytes)."""

    index: int
    free: int


def visible_gpus() -> list[Gpu]:
    """The GPUs of this machine with their free memory now."""
    import torch  # here: the command line reads this module's defaults before anything needs torch

    if not torch.cuda.is_available():
        return []
    return [Gpu(i, torch.cuda.mem_get_info(i)[0]) for i in range(torch.cuda.device_count())]


def slots(*, workers: int, runs_per_gpu: str | int = 1, gpus: list[Gpu] | None = None, run_bytes: int | None = None,
          cores: int | None = None) -> list[dict[str, str]]:
    """The environment of each worker: which GPU it sees and how many CPU threads it may use.

    Args:
        workers: CPU workers when there is no GPU.
        runs_per_gpu: runs sharing each GPU, or ``auto``: as many as fit in the GPU's free memory at
            ``run_bytes`` each (at least one, at most :data:`MAX_PER_GPU`).
        gpus: the GPUs (default: this machine's); cores: CPU cores to share (default: this machine's).

    Returns:
        One environment per slot; every slot gets an equal share of the cores (at least one thread).
    """
    gpus = visible_gpus() if gpus is None else gpus
    cores = cores or usable_cores()
    if not gpus:
        devices = [""] * workers
    else:
        devices = []
        for gpu in gpus:
            if runs_per_gpu == AUTO:
                k = 1 if not run_bytes else int(min(MAX_PER_GPU, max(1, gpu.free // run_bytes)))
            else:
                k = int(runs_per_gpu)
            devices += [str(gpu.index)] * k
    threads = str(max(1, cores // len(devices)))
    return [{"CUDA_VISIBLE_DEVICES": d, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads} for d in devices]
