"""A small sweep as a W&B user compares it: its real offline files (the ``.wandb`` transaction logs that ``wandb sync``
uploads, decoded record by record), grouped by the W&B config's ``variant``, give the report's row means; every run
carries its study; two folders of one sweep never share a group or a report run."""

from __future__ import annotations

import csv
import hashlib
import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest
import wandb

from ablate.runs import wandb_offline as offline
from tests.conftest import ablate_here
from tests.runs.test_wandb import _no_credentials
from tests.runs.wandb_records import RunLog
from tests.sweep.conftest import sweep_file

ROWS = """
- {name: base}
- {name: pre, model.norm_position: pre}
"""


@pytest.fixture(scope="module")
def studied(tmp_path_factory) -> Path:
    """The sweep (2 rows x 2 seeds, W&B offline, no key) launched into two folders of one name, each reported twice;
    the working folder."""
    work = tmp_path_factory.mktemp("study")
    path = sweep_file(work, ROWS, name="study")
    text = path.read_text().replace("logger=none", "logger=wandb")
    path.write_text(text + "parameters:\n  seed: {values: [0, 1]}\n")
    with pytest.MonkeyPatch.context() as mp:
        _no_credentials(mp, tmp_path_factory.mktemp("home"))
        for out in ("sweeps/study", "other"):
            ran = ablate_here("sweep", str(path), "--out", out, "--workers", "2", cwd=work)
            assert ran.returncode == 0, ran.stderr[-3000:]
            for _ in range(2):
                ran = ablate_here("report", out, cwd=work)
                assert ran.returncode == 0, ran.stderr[-3000:]
        wandb.teardown()
    return work


def _runs(sweep_dir: Path) -> list[RunLog]:
    return [RunLog(p) for p in sorted((sweep_dir / "runs").rglob("run-*.wandb"))]


def _table(sweep_dir: Path) -> dict[str, dict[str, str]]:
    with open(sweep_dir / "report" / "table.csv", newline="") as f:
        return {row["variant"]: row for row in csv.DictReader(f)}


def test_runs_grouped_by_variant_give_the_reports_row_means(studied, capsys):
    sweep_dir = studied / "sweeps" / "study"
    groups: dict[str, list[float]] = defaultdict(list)
    for log in _runs(sweep_dir):
        last = [row["val/loss"] for row in log.history if "val/loss" in row][-1]  # the curve's last point
        assert last == log.summary["final/val/loss"]
        groups[log.config["variant"]].append(last)
    table = _table(sweep_dir)
    with capsys.disabled():
        print("\nvariant  n  W&B group mean (history's last val/loss)  report's val/loss_mean")
        for variant, values in sorted(groups.items()):
            print(f"{variant:8s} {len(values)}  {statistics.fmean(values):.12f}  "
                  f"{float(table[variant]['val/loss_mean']):.12f}")
    assert set(groups) == set(table) == {"base", "pre"}
    for variant, values in groups.items():
        assert len(values) == int(table[variant]["val/loss_n"]) == 2
        assert statistics.fmean(values) == pytest.approx(float(table[variant]["val/loss_mean"]), rel=1e-12)


def test_every_run_carries_its_study_as_values_a_dashboard_groups_by(studied):
    sweep_dir = studied / "sweeps" / "study"
    plan = {r["id"]: r for r in json.loads((sweep_dir / "plan.json").read_text())["runs"]}
    group = "study-" + hashlib.sha256(str(sweep_dir.resolve()).encode()).hexdigest()[:8]  # the folder's place
    for log in _runs(sweep_dir):
        entry = plan[Path(log.config["output_dir"]).name]
        assert log.run.run_group == log.config["sweep"] == group
        assert (log.config["row"], log.config["variant"], log.config["seed"]) == (entry["variant"],) * 2 + (
            entry["seed"],)
        assert log.config["model.norm_position"] == entry["varied"]["model.norm_position"]  # the swept key itself
        assert list(log.run.tags) == ([] if entry["variant"] == "base" else ["model.norm_position=pre"])
        assert not any(k.startswith("wandb.study") for k in log.config)


def test_two_folders_of_one_sweep_have_their_own_group_and_report_run(studied):
    folders = [studied / "sweeps" / "study", studied / "other"]
    groups = [{log.run.run_group for log in _runs(f)} for f in folders]
    assert all(len(g) == 1 for g in groups) and groups[0] != groups[1]
    reports = [offline.offline_runs([f / "report"]) for f in folders]
    assert [len(r) for r in reports] == [1, 1]  # two `ablate report` calls each: one report run, updated in place
    logs = [RunLog(next(r[0].glob("run-*.wandb"))) for r in reports]
    assert logs[0].run.run_id != logs[1].run.run_id
    assert [log.run.run_group for log in logs] == [next(iter(g)) for g in groups]
    assert len(offline.offline_runs([studied])) == 2 * 4 + 2  # what ablate sync would upload: 8 runs, 2 reports


def test_the_report_table_in_wandb_has_each_column_once_and_the_reports_means(studied):
    sweep_dir = studied / "sweeps" / "study"
    (folder,) = offline.offline_runs([sweep_dir / "report"])
    log = RunLog(next(folder.glob("run-*.wandb")))
    (row,) = [r for r in log.history if "report/table" in r]
    table = json.loads((folder / "files" / row["report/table"]["path"]).read_text())
    columns = table["columns"]
    assert len(columns) == len(set(columns))
    means = {r[columns.index("variant")]: r[columns.index("val/loss_mean")] for r in table["data"]}
    assert means == pytest.approx({k: float(v["val/loss_mean"]) for k, v in _table(sweep_dir).items()})
