"""What each Slurm job asks for: the sweep file's ``slurm:`` section and the command line's options, one setting each
(:class:`SlurmSettings`), checked once here. Light to import: the sweep file's reader parses the section whatever the
backend, so a typo is refused before a launch."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ablate.errors import ConfigError


@dataclass(frozen=True)
class SlurmSettings:
    """What each job asks Slurm for: the sweep file's ``slurm:`` keys, each also a command-line option."""

    partition: str | None = None  # --partition
    account: str | None = None  # --account
    qos: str | None = None  # --qos
    gpus_per_run: int = 0  # --gpus-per-run: GPUs of one node for each job
    cpus_per_run: int = 1  # --cpus-per-run: CPUs for each job (its runs' torch threads)
    mem_gb: float | None = None  # --mem-per-run: memory of each job, GB (None: the partition's default)
    time_min: int = 60  # --time-limit: each job's time limit, minutes; a run that reaches it is requeued
    sbatch: tuple[str, ...] = ()  # --sbatch: more #SBATCH options, as "--constraint=a100" or "--exclusive"
    setup: tuple[str, ...] = ()  # shell lines each job runs first ("module load cuda", "source venv/bin/activate")
    max_jobs: int = 64  # --max-jobs: jobs queued or running at once (a job array's %N)
    signal_delay_s: int | None = None  # SIGUSR2 this long before the time limit, the run then saves its step (None:
    # DEFAULT_DELAY_S, or a quarter of a shorter time limit)
    max_timeouts: int = 3  # how many times a job that reached its time limit is requeued

    @classmethod
    def parse(cls, section: Any, source: str) -> SlurmSettings:
        """The sweep file's ``slurm:`` section (None: the defaults).

        Raises:
            ConfigError: a key that is none of the settings, or a value of the wrong kind.
        """
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError("slurm", section, f"a mapping of {', '.join(f.name for f in fields(cls))}", source)
        known = {f.name: f for f in fields(cls)}
        for key in section:
            if key not in known:
                raise ConfigError(f"slurm.{key}", section[key], f"a slurm key: {', '.join(known)}", source)
        return cls().updated({k: v for k, v in section.items()}, source, prefix="slurm.").check(source)

    def updated(self, values: dict[str, Any], source: str, prefix: str = "--") -> SlurmSettings:
        """These settings with ``values`` (None: left as they are), each checked.

        Raises:
            ConfigError: a value of the wrong kind, naming its key (``prefix`` + name).
        """
        changes = {}
        for name, value in values.items():
            if value is None:
                continue
            key = prefix + (name if prefix.endswith(".") else OPTION.get(name, name).removeprefix("--"))
            changes[name] = _checked(name, value, key, source)
        return replace(self, **changes).check(source)

    @property
    def delay_s(self) -> int:
        """Seconds between the time limit's warning (SIGUSR2) and the limit."""
        return self.signal_delay_s if self.signal_delay_s is not None else min(DEFAULT_DELAY_S, self.time_min * 15)

    def check(self, source: str) -> SlurmSettings:
        """These settings, once they agree with each other.

        Raises:
            ConfigError: the time limit's warning would come in the job's first half (its start takes seconds: a
                warning before the job can take it kills the job unsaved).
        """
        if self.delay_s * 2 > self.time_min * 60:
            raise ConfigError("slurm.signal_delay_s", self.delay_s, f"at most half the time limit ({self.time_min} min "
                              f"= {self.time_min * 60} s): the job needs time to start before the warning", source)
        return self

    def executor_parameters(self) -> dict[str, Any]:
        """submitit's ``SlurmExecutor.update_parameters`` for one job of these settings."""
        extra = {}
        for line in self.sbatch:
            name, _, value = line.removeprefix("--").partition("=")
            extra[name] = value if value else True
        params: dict[str, Any] = {"nodes": 1, "ntasks_per_node": 1, "cpus_per_task": self.cpus_per_run,
                                  "time": self.time_min, "signal_delay_s": self.delay_s,
                                  "array_parallelism": self.max_jobs, "setup": list(self.setup),
                                  "additional_parameters": extra}
        if self.gpus_per_run:
            params["gpus_per_node"] = self.gpus_per_run
        if self.mem_gb is not None:
            params["mem"] = f"{max(1, round(self.mem_gb * 1024))}M"
        for name in ("partition", "account", "qos"):
            if getattr(self, name):
                params[name] = getattr(self, name)
        return params

    def sbatch_options(self) -> list[str]:
        """The same resources as ``sbatch`` options (for ``sbatch --test-only``)."""
        words = [f"--cpus-per-task={self.cpus_per_run}", f"--time={self.time_min}", "--nodes=1", "--ntasks=1"]
        words += [f"--{name}={getattr(self, name)}" for name in ("partition", "account", "qos") if getattr(self, name)]
        words += [f"--gpus-per-node={self.gpus_per_run}"] if self.gpus_per_run else []
        words += [f"--mem={max(1, round(self.mem_gb * 1024))}M"] if self.mem_gb is not None else []
        return words + list(self.sbatch)


DEFAULT_DELAY_S = 120  # the time limit's warning: time enough for a run to finish its step and save it


OPTION = {"partition": "--partition", "account": "--account", "qos": "--qos", "gpus_per_run": "--gpus-per-run",
          "cpus_per_run": "--cpus-per-run", "mem_gb": "--mem-per-run", "time_min": "--time-limit",
          "sbatch": "--sbatch", "max_jobs": "--max-jobs"}  # each setting's command-line option
_POSITIVE_INT = {"cpus_per_run", "time_min", "max_jobs", "max_timeouts"}
_NONNEGATIVE_INT = {"gpus_per_run", "signal_delay_s"}


def _checked(name: str, value: Any, key: str, source: str) -> Any:
    """``value`` of setting ``name`` in its type, or a one-line refusal naming ``key``."""
    if name in ("partition", "account", "qos"):
        if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
            raise ConfigError(key, value, "a name without spaces", source)
        return value
    if name in ("sbatch", "setup"):
        lines = [value] if isinstance(value, str) else value
        if not isinstance(lines, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in lines):
            raise ConfigError(key, value, "a list of non-empty strings", source)
        if name == "sbatch":
            bad = [v for v in lines if not v.startswith("--") or "\n" in v]
            if bad:
                raise ConfigError(key, bad[0], 'an sbatch option as "--name=value" or "--flag", one a line', source)
        return tuple(lines)
    if name == "mem_gb":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ConfigError(key, value, "a positive number of GB", source)
        return float(value)
    lowest = 1 if name in _POSITIVE_INT else 0
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise ConfigError(key, value, "a positive integer" if lowest else "a non-negative integer", source)
    return value
