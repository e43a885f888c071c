"""The README's promises and the docs' figures: its test command is what CI runs, its custom-component example works,
and the lists and figures it and docs/*.md state are the code's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
COMPONENTS = (REPO / "docs" / "components.md").read_text()  # the faithful-vs-variant table
PERFORMANCE = (REPO / "docs" / "performance.md").read_text()  # the quickstart's fresh-clone runs


def _block_after(label: str) -> str:
    """The fenced code block that follows a line starting with ``label``."""
    match = re.search(rf"^{re.escape(label)}.*?\n```\w*\n(.*?)```", README, flags=re.S | re.M)
    assert match, f"README has no code block after {label!r}"
    return match.group(1)


def test_ci_runs_the_readme_test_command():
    test_command = _block_after("Run the tests").strip()
    assert test_command in (REPO / ".ci" / "run").read_text()


def test_readme_user_attention_and_score_bias_positional_work_from_yaml(tmp_path):
    (tmp_path / "configs").symlink_to(REPO / "configs")
    (tmp_path / "my_parts.py").write_text(_block_after("`my_parts.py`"))
    (tmp_path / "my_study.yaml").write_text(_block_after("`my_study.yaml`:"))

    def ablate(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ablate.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    listed = ablate("components", "attention", "--import", "my_parts")
    assert listed.returncode == 0, listed.stderr
    assert "temperature" in listed.stdout and "init: float = 1.0" in listed.stdout
    run = ablate("train", "my_study.yaml", "logger=none", "train.max_steps=4", "train.val_every=2",
                 "trainer.enable_progress_bar=false", "output_dir=run")
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "finished"
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "attention: temperature" in config and "positional: learned_alibi" in config
    weights = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    names = weights["state_dict"].keys()
    assert any(n.endswith(".log_t") for n in names) and any(n.endswith(".slope") for n in names)  # really built
    log_t = next(v for n, v in weights["state_dict"].items() if n.endswith(".log_t"))
    assert torch.allclose(log_t.exp().mean(), torch.tensor(2.0), atol=0.05)  # attention_args.init reached it


def _variant_rows() -> dict[str, set[str]]:
    """docs/components.md's faithful-vs-variant table: key -> the variant names listed for it."""
    section = COMPONENTS[COMPONENTS.index("## What is faithful"):COMPONENTS.index("## Conventions")]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # "\|" is a pipe in a cell
        if len(cells) == 4 and cells[0].startswith(("`model.", "`train.")):
            rows.setdefault(cells[0].strip("`"), set()).add(cells[1].split()[0].strip("`"))
    return rows


def test_the_faithful_vs_variant_table_lists_every_registered_variant_with_a_citation():
    from ablate import registry

    rows = _variant_rows()
    for kind in registry.kinds().values():
        if kind.name == "task":  # data, not a part of the model
            continue
        builtin = [e for e in registry.entries(kind.name) if e.module.startswith("ablate.")]  # not other tests' own
        assert rows.get(kind.key) == {e.name for e in builtin}, kind.key
        for entry in builtin:
            cites = re.search(r"\(.*(19|20)\d\d.*\)", entry.description) or "control" in entry.description
            assert cites, f"{kind.name} {entry.name}: its description cites no paper and is not a declared control"


def test_the_variant_table_is_what_ablate_components_markdown_prints(capsys):
    """docs/components.md's rows are the registry's, word for word: a description edited in code is edited there
    too."""
    from ablate.cli import main

    assert main(["components", "--markdown"]) == 0
    from ablate import registry

    own = {e.name for k in registry.kinds() for e in registry.entries(k) if not e.module.startswith("ablate.")}
    rows = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("| `data.")
            and not any(f"| `{name}`" in line for name in own)]  # variants other tests registered
    missing = [row for row in rows if row not in COMPONENTS]
    assert not missing, missing[:3]


def test_the_components_mask_comment_lists_every_built_in_mask_with_its_parameters():
    from ablate import registry

    (comment,) = re.findall(r"^ablate components mask\s+# (.*)$", README, flags=re.M)
    builtin = [e for e in registry.entries("mask") if e.module.startswith("ablate.")]
    expected = [e.name + (f" [{', '.join(p.name for p in e.params)}]" if e.params else "") for e in builtin]
    assert comment == ", ".join(expected)


def test_the_quickstart_s_run_counts_and_minutes_are_the_readme_s_and_within_its_design():
    """The quickstart file quotes the README's minutes and the fresh-clone runs docs/performance.md lists (23 on AVX2,
    32 in bf16); both counts lie between the runs its sequential design starts with and the most it may train."""
    from ablate.sweep import load_sweep

    text = (REPO / "experiments" / "quickstart.yaml").read_text()
    minutes, (low, high) = re.search(r"About (\d+ to \d+) minutes", text).group(1), map(int, re.search(
        r"\((\d+) to (\d+) runs", text).groups())
    assert f"About {minutes} minutes on this project's 2-core CPU" in README
    assert f"({low} runs, " in PERFORMANCE and f"; {high} runs." in PERFORMANCE
    sweep = load_sweep(REPO / "experiments" / "quickstart.yaml")
    rows, seeds = len(sweep.rows), len(sweep.seeds)
    assert rows * seeds <= low <= high <= sweep.decide.most_runs(rows)


def test_the_readme_lists_every_built_in_kind_in_declaration_order():
    from ablate import registry

    (listed,) = re.findall(r"registered component of a declared kind: (.*?)\n\(`ablate components`", README, flags=re.S)
    names = re.findall(r"`(\w+)`", listed)
    builtin = [k.name for k in registry.kinds().values()
               if any(e.module.startswith("ablate.") for e in registry.entries(k.name))]  # not other tests' own kinds
    assert names == builtin


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_in_the_readme_and_docs_reaches_a_file_and_its_heading():
    pages = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if "://" in target:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in {_anchor(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), flags=re.M)}:
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
