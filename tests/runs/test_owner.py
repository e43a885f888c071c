"""Which folders ablate may write (:mod:`ablate.runs.owner`): every kind against every wrong place, the identity of a
sweep, folders written before the marker, and the figure a run's attention is drawn into."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.runs.owner import KINDS, MARKER, Owner, check_figure, check_folder, claim, owner_of, sweep_identity


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def places(tmp_path) -> Path:
    """A file, a folder of someone's files, and one folder of each kind (claimed as ablate claims them)."""
    (tmp_path / "file").write_text("x\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("mine\n")
    for kind in KINDS:
        claim(tmp_path / kind, kind, {"name": kind}, key="out")
        (tmp_path / kind / "something").write_text("x\n")
    return tmp_path


WRONG = {  # place (relative, or absolute) -> the words of the refusal
    "/": "not the root of the file system",
    "file": "(this is a file)",
    "file/child": "its parent",
    "notes": "a folder of files ablate did not write",
    "run/inner": "not a folder inside the run folder",
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("place", sorted(WRONG))
def test_every_kind_refuses_every_wrong_place_and_writes_nothing(kind, place, places):
    before = _tree(places)
    with pytest.raises(ConfigError, match=WRONG[place].replace("(", r"\(").replace(")", r"\)")):
        check_folder(places / place, kind, {"name": kind}, key="out")  # what claim asks first (no write to / if not)
    assert _tree(places) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("other", KINDS)
def test_a_folder_of_another_kind_is_refused_and_one_of_the_same_kind_taken(kind, other, places):
    if kind == other:
        assert claim(places / other, kind, {"name": other}, key="out") == places / other
    else:
        with pytest.raises(ConfigError, match=f"this is a {other} folder"):
            check_folder(places / other, kind, {"name": other}, key="out")


def test_a_folder_of_the_same_kind_but_another_identity_is_refused_naming_what_differs(places):
    with pytest.raises(ConfigError, match=r"belongs to another sweep: name: 'sweep' -> 'other'"):
        claim(places / "sweep", "sweep", {"name": "other"}, key="--out")


def test_a_new_or_empty_folder_is_claimed_with_its_marker(tmp_path):
    (tmp_path / "empty").mkdir()
    for name in ("new/deeper", "empty"):
        claim(tmp_path / name, "sweep", {"name": "s", "overrides": []}, key="--out")
        assert json.loads((tmp_path / name / MARKER).read_text()) == {"kind": "sweep",
                                                                       "identity": {"name": "s", "overrides": []}}


def test_a_launcher_that_looks_while_another_claims_the_folder_sees_a_new_folder(tmp_path, monkeypatch):
    """Two launchers of one sweep: the second looks at the folder at the instant the first's marker is half written
    (its temporary file in the folder, not yet renamed into place). It must see a new folder, not a foreign one."""
    import ablate.runs.files as files

    identity, looked = {"name": "s", "overrides": []}, []
    rename = files.os.replace

    def rename_after_another_look(src, dst):
        looked.append(sorted(p.name for p in Path(dst).parent.iterdir()))
        check_folder(Path(dst).parent, "sweep", identity, key="--out")  # the other launcher: must not raise
        rename(src, dst)

    monkeypatch.setattr(files.os, "replace", rename_after_another_look)
    claim(tmp_path / "s", "sweep", identity, key="--out")
    assert len(looked) == 1 and len(looked[0]) == 1 and looked[0][0].startswith(f".{MARKER}.")  # the half-written one
    monkeypatch.undo()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / f".{MARKER}.x.tmp").mkdir()  # not a file ablate writes that way: still only the marker's
    check_folder(tmp_path / "other", "sweep", identity, key="--out")
    (tmp_path / "other" / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match="a folder of files ablate did not write"):
        check_folder(tmp_path / "other", "sweep", identity, key="--out")


def test_a_folder_written_before_the_marker_is_known_by_its_files(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").write_text("{}")
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "plan.json").write_text('{"name": "old", "runs": []}')
    assert owner_of(tmp_path / "run").kind == "run"
    assert owner_of(tmp_path / "sweep").identity == {"name": "old"}
    with pytest.raises(ConfigError, match="name: 'old' -> 'new'"):
        check_folder(tmp_path / "sweep", "sweep", {"name": "new", "overrides": []}, key="--out")
    claim(tmp_path / "sweep", "sweep", {"name": "old", "overrides": ["a=1"]}, key="--out")  # adopted: now it says all
    with pytest.raises(ConfigError, match="overrides"):
        check_folder(tmp_path / "sweep", "sweep", {"name": "old", "overrides": []}, key="--out")


ORDERS = [["model.dropout=0.1", "train.max_steps=3"], ["train.max_steps=3", "model.dropout=0.1"],
          ["train.max_steps=9", "model.dropout=0.1", "train.max_steps=3"],
          ["model.dropout=0.10", "train.max_steps=3.0"]]


@pytest.mark.parametrize("order", range(len(ORDERS)))
def test_a_sweeps_identity_is_what_its_overrides_set_not_their_order(order, tmp_path):
    """Cause 1 of issue 27: `a=1 b=2` and `b=2 a=1` (or `b=9 a=1 b=2`: the last counts) launch the same runs, so the
    same sweep; other values are another sweep, refused over the folder. Markers written before sweep_identity held
    the overrides as given (a list): they compare alike."""
    claim(tmp_path / "new", "sweep", sweep_identity("s", ORDERS[0]), key="--out")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / MARKER).write_text(json.dumps({"kind": "sweep", "identity": {"name": "s",
                                                                                      "overrides": ORDERS[0]}}))
    for folder in ("new", "old"):
        claim(tmp_path / folder, "sweep", sweep_identity("s", ORDERS[order]), key="--out")
        for other in (["model.dropout=0.2", "train.max_steps=3"], ["model.dropout=0.1"],
                      ["model.dropout=0.1", "train.max_steps=3", "seed=1"]):
            with pytest.raises(ConfigError, match="belongs to another sweep: overrides: "):
                check_folder(tmp_path / folder, "sweep", sweep_identity("s", other), key="--out")
    assert json.loads((tmp_path / "new" / MARKER).read_text())["identity"] == {
        "name": "s", "overrides": {"model": {"dropout": 0.1}, "train": {"max_steps": 3}}}


def test_a_project_folder_holding_a_checkpoints_folder_is_not_taken_for_a_run(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    run = claim(tmp_path / "runs" / "x", "run", None, key="output_dir")  # inside it, but it is not a run
    assert owner_of(run) == Owner("run", None)
    assert owner_of(tmp_path, strict=True) is None and owner_of(tmp_path) == Owner("run", None)


def test_a_marker_ablate_did_not_write_is_one_line(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / MARKER).write_text('{"kind": "bucket"}')
    with pytest.raises(ConfigError, match="the marker ablate writes"):
        owner_of(tmp_path / "x")


FIGURES = {  # --out -> the words of the refusal; None: accepted
    "run/attention.png": None,
    "elsewhere/a.png": None,
    "run/config.yaml": "the name must end in .png",
    "run/fake.png": "this file is not a PNG",
    "run/inner/a.png": "not inside the run folder",
    "file/a.png": "its parent",
    "/a.png": "not in the root",
    "run": "the name must end in .png",
}


@pytest.mark.parametrize("out", sorted(FIGURES))
def test_a_figure_lands_beside_a_runs_files_never_over_or_among_them(out, places):
    (places / "run" / "fake.png").write_text("not a png")
    (places / "run" / "inner").mkdir()
    if FIGURES[out] is None:
        check_figure(places / out, key="--out")
    else:
        with pytest.raises(ConfigError, match=FIGURES[out]):
            check_figure(places / out, key="--out")
