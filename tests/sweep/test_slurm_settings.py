"""The sweep file's ``slurm:`` section and the command line's Slurm options: parsed, checked and turned into what
submitit and sbatch are given (no cluster needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ablate.cli.sweep import relaunch_command
from ablate.errors import ConfigError
from ablate.sweep import load_sweep
from ablate.sweep.slurm_settings import SlurmSettings
from tests.sweep.conftest import sweep_file


def _with_slurm(tmp_path, section: str):
    """A one-row sweep file with ``slurm: SECTION``."""
    path = sweep_file(tmp_path, "- {name: base}")
    path.write_text(path.read_text() + f"slurm: {section}\n")
    return path


def test_a_slurm_section_sets_each_jobs_resources(tmp_path):
    path = _with_slurm(tmp_path, "{partition: gpu, gpus_per_run: 1, cpus_per_run: 4, mem_gb: 16, time_min: 240, "
                       "sbatch: ['--constraint=a100', '--exclusive'], setup: ['module load cuda'], max_jobs: 8}")
    settings = load_sweep(path).slurm
    params = settings.executor_parameters()
    assert params["partition"] == "gpu" and params["gpus_per_node"] == 1 and params["cpus_per_task"] == 4
    assert params["mem"] == "16384M" and params["time"] == 240 and params["array_parallelism"] == 8
    assert params["additional_parameters"] == {"constraint": "a100", "exclusive": True}
    assert params["setup"] == ["module load cuda"] and params["ntasks_per_node"] == 1
    assert settings.sbatch_options() == ["--cpus-per-task=4", "--time=240", "--nodes=1", "--ntasks=1",
                                         "--partition=gpu", "--gpus-per-node=1", "--mem=16384M",
                                         "--constraint=a100", "--exclusive"]


def test_the_command_line_overrides_the_section_and_none_leaves_it():
    settings = SlurmSettings(partition="gpu", time_min=240).updated({"partition": "debug", "time_min": None}, "cli")
    assert (settings.partition, settings.time_min) == ("debug", 240)


@pytest.mark.parametrize("section, key, allowed", [
    ("{partiton: gpu}", "slurm.partiton", "a slurm key: partition, account"),
    ("{cpus_per_run: 0}", "slurm.cpus_per_run", "a positive integer"),
    ("{gpus_per_run: -1}", "slurm.gpus_per_run", "a non-negative integer"),
    ("{mem_gb: .inf}", "slurm.mem_gb", "a positive number of GB"),
    ("{time_min: 1.5}", "slurm.time_min", "a positive integer"),
    ("{partition: 'a b'}", "slurm.partition", "a name without spaces"),
    ("{sbatch: ['constraint=a100']}", "slurm.sbatch", 'an sbatch option as "--name=value"'),
    ("[gpu]", "slurm", "a mapping of partition"),
])
def test_a_wrong_slurm_setting_is_refused_naming_its_key(tmp_path, section, key, allowed):
    path = _with_slurm(tmp_path, section)
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert err.value.key == key and allowed in str(err.value)


def test_the_relaunch_command_repeats_the_slurm_options():
    args = argparse.Namespace(sweep="s.yaml", overrides=[], out=None, workers=None, runs_per_gpu="auto", fuse="auto",
                              max_runs=None, max_seeds=None, backend="slurm", address=None, gpus_per_run=1.0,
                              cpus_per_run=None, partition="gpu", account=None, qos=None, mem_per_run=None,
                              time_limit=30, max_jobs=None, sbatch=["--constraint=a100"], retry_failed=False,
                              change_design=False)
    assert relaunch_command(args) == (f"ablate sweep {Path.cwd() / 's.yaml'} --backend slurm --gpus-per-run 1.0 "
                                      "--partition gpu --time-limit 30 --sbatch=--constraint=a100")


def test_the_time_limits_warning_leaves_the_job_time_to_start(tmp_path):
    """SIGUSR2 before the wrapper can take it would kill the job unsaved: the warning comes in the job's second half;
    by default 120 s before the limit, or a quarter of a shorter limit."""
    assert SlurmSettings().delay_s == 120 and SlurmSettings(time_min=2).delay_s == 30
    assert SlurmSettings(time_min=1).executor_parameters()["signal_delay_s"] == 15
    with pytest.raises(ConfigError) as err:
        load_sweep(_with_slurm(tmp_path, "{time_min: 1, signal_delay_s: 45}"))
    assert err.value.key == "slurm.signal_delay_s" and "at most half the time limit (1 min = 60 s)" in str(err.value)
