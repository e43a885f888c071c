"""A sweep folder's layout: the one owner of its names, which the sweep, its backends, the report, ``ablate status``
and the CLI ask (a run folder's names are :mod:`ablate.runs.files`'; ``plan.json`` is :mod:`ablate.runs.plan`'s).

    sweeps/<name>/                  the sweep folder (``--out`` chooses another)
        sweep.yaml                  the sweep file it was launched from (a command-line sweep's, written)
        plan.json                   every planned run (ablate.runs.plan)
        runs/<id>/                  one run folder per planned run (ablate.runs.files)
        arrays.json                 which runs train together as seed arrays, recorded before any starts
        projection.json             the wall time the first launch projected (ablate.sweep.projection)
        arrays/<hash>/              a seed array's own checkpoint; arrays/<first id>+<others>.log its output
        slurm/<job id>/             submitit's files for a Slurm job; slurm/jobs.json the jobs submitted;
                                    slurm/<job key>.ended.json how a job's runs ended, written on its node
        report/                     table.md, table.csv, runs.csv, report.html (ablate.report.write)
"""

from __future__ import annotations

from pathlib import Path

SWEEPS_ROOT = Path("sweeps")  # where a sweep's folder is, by its name, unless --out says otherwise
SWEEP_FILE = "sweep.yaml"
RUNS_DIR = "runs"
ARRAYS_FILE = "arrays.json"  # {"arrays": [[run id, ...], ...]}, each list one array's members
ARRAYS_DIR = "arrays"
PROJECTION_FILE = "projection.json"  # the first launch's projected wall time, which the report sets against the actual
SLURM_DIR = "slurm"
SLURM_JOBS_FILE = "jobs.json"
REPORT_DIR = "report"
REPORT_PAGE = "report.html"
TABLE_CSV = "table.csv"


def default_sweep_dir(name: str) -> Path:
    """``sweeps/<name>``: a sweep's folder when ``--out`` does not name one."""
    return SWEEPS_ROOT / name


def sweep_file(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / SWEEP_FILE


def runs_dir(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / RUNS_DIR


def arrays_dir(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / ARRAYS_DIR


def array_log(sweep_dir: str | Path, first: str, members: int) -> Path:
    """Where a seed array's output goes: named by its first member's id and how many others it has."""
    return arrays_dir(sweep_dir) / f"{first}+{members - 1}.log"


def projection_path(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / PROJECTION_FILE


def slurm_dir(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / SLURM_DIR


def slurm_jobs(sweep_dir: str | Path) -> Path:
    return slurm_dir(sweep_dir) / SLURM_JOBS_FILE


def report_dir(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / REPORT_DIR
