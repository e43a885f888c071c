"""The shipped Table 3 sweeps: each runs seeds until decided on perplexity (val/loss) and BLEU of the test split
(averaged checkpoints, beam 4, as section 6.1), and on a GPU every variant's seeds train fused, as the dry run says."""

from __future__ import annotations

import pytest

from ablate.sweep.read import load_sweep
from tests.conftest import REPO, ablate_here

TABLE3 = ("table3_multi30k.yaml", "table3_small.yaml")


@pytest.mark.parametrize("name", TABLE3)
def test_a_table3_file_decides_each_row_on_perplexity_and_bleu(name):
    sweep = load_sweep(REPO / "experiments" / name)
    assert [(j.name, j.goal) for j in sweep.judged] == [("val/loss", "minimize"), ("test/bleu", "maximize")]
    assert all(j.margin is not None for j in sweep.judged)
    assert sweep.seeds == [0, 1, 2] and sweep.decide.max_seeds == 7
    options = sweep.evaluate_options()
    assert options[options.index("--beam") + 1] == "4" and int(options[options.index("--average-last") + 1]) >= 2


@pytest.mark.slow
def test_on_a_gpu_the_dry_run_fuses_every_variant_of_table3(shared_data, tmp_path, monkeypatch):
    """A faked CUDA device with 80 GiB free: the dry run of the paper's recipe (step checkpoints kept for averaging,
    val/bleu decoded) trains each variant's three seeds as one array; no variant is left alone."""
    import ablate.sweep.slots as machine
    from ablate.sweep.slots import Gpu

    monkeypatch.setattr(machine, "visible_gpus", lambda: [Gpu(0, 80 * 2**30)])
    done = ablate_here("sweep", str(REPO / "experiments" / "table3_multi30k.yaml"), "--dry-run",
                       f"data.path={shared_data / 'multi30k'}", "--out", str(tmp_path / "dry"), cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    seeds = out[out.index("how seeds train:"):].splitlines()
    variants = [line for line in seeds[1:] if line.startswith("  ") and ": " in line and "later look" not in line]
    assert len(variants) == 19, seeds
    assert all(line.split(": ", 1)[1] == "fused, 1 array of 3 seeds" for line in variants), "\n".join(variants)
