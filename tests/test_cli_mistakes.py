"""The command line never traces back: plausible mistakes in every subcommand, each answered with one line that
names the option or key, the value and what is allowed, exit code 2, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ablate
from ablate.cli import main
from ablate.train.run import train
from tests.conftest import REPO, TINY

SWEEP = "s.yaml"


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory) -> Path:
    """A finished run of the embedded (synthetic) task: it has no tokenizer."""
    out = tmp_path_factory.mktemp("synthetic")
    return train(ablate.load_config(None, TINY + ["train.max_steps=2", "train.val_every=2",
                                                  "trainer.enable_progress_bar=false", f"output_dir={out / 'run'}"]))


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory) -> Path:
    """A finished run of the embedded task whose positions are learned: it encodes at most 16 of them."""
    out = tmp_path_factory.mktemp("learned")
    return train(ablate.load_config(None, TINY + ["train.max_steps=2", "train.val_every=2", "model.positional=learned",
                                                  "model.positional_args.max_len=16",
                                                  "trainer.enable_progress_bar=false", f"output_dir={out / 'run'}"]))


def _owned(folder: Path, kind: str, identity: dict | None, files: dict[str, str]) -> None:
    """A folder as ablate writes it: its marker and ``files`` (relative path -> text)."""
    folder.mkdir(parents=True)
    (folder / ".ablate").write_text(json.dumps({"kind": kind, "identity": identity}))
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    (tmp_path / "configs").symlink_to(REPO / "configs")
    (tmp_path / SWEEP).write_text(f"name: s\nbase: {REPO / 'configs/default.yaml'}\nrows: [{{name: base}}]\n")
    for name, text in {
        "typo.yaml": "metod: grid\n",
        "noop.yaml": f"base: {REPO / 'configs/default.yaml'}\nparameters:\n  data.max_tokens: "
                     "{values: [1000, 2000]}\n",
        "grid.yaml": "parameters:\n  model.dropout: {distribution: uniform, min: 0.0, max: 0.3}\n",
        "weights.yaml": "method: random\nrun_cap: 2\nparameters:\n  model.dropout: {values: [0.1, 0.2], "
                        "probabilities: [0.5, 0.6]}\n",
        "heads.yaml": f"base: {REPO / 'configs/default.yaml'}\nparameters:\n  model.n_heads: {{values: [4, 5]}}\n",
        "margin.yaml": "rows: [{name: base}]\ndecide: {margin: -0.1}\n",
        "relative.yaml": "rows: [{name: base}]\ndecide: {margin: 2 percent}\n",
        "budget.yaml": "rows: [{name: base}]\nparameters:\n  seed: {values: [0, 1, 2]}\ndecide: {max_seeds: 2}\n",
        "noseeds.yaml": "rows: [{name: base}]\ndecide: {max_seeds: 5}\n",
        "seqrandom.yaml": "method: random\nrun_cap: 4\nparameters:\n  seed: {values: [0, 1]}\n  model.dropout: "
                          "{values: [0.1, 0.2]}\ndecide: {max_seeds: 5}\n",
        "decidekey.yaml": "rows: [{name: base}]\ndecide: {seeds: 5}\n",
        "seeds.yaml": f"base: {REPO / 'configs/default.yaml'}\nrows: [{{name: base}}]\nparameters:\n  seed: "
                      "{values: [0, 1, 2]}\n",
        "twice.yaml": "model:\n  d_ff: 64\ntrain:\n  max_steps: 2\nmodel:\n  dropout: 0.3\n",
        "rowtwice.yaml": "rows:\n  - {name: base}\n  - {name: a, model.d_ff: 64, model.d_ff: 128}\n",
        "metric.yaml": "metric: {name: val/los, goal: minimize}\nrows: [{name: base}]\n",
        "evaluate.yaml": f"base: {REPO / 'configs/default.yaml'}\nrows: [{{name: base}}]\n"
                         "evaluate: {lengths: [1, 2]}\n",
        "defaults5.yaml": "defaults: 5\n",
        "tilde.yaml": "~: 1\n",
        "bomb.yaml": "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi")),
        "overrides.yaml": "base: {config: configs/default.yaml, overrides: train.max_steps=3}\nrows: [{name: base}]\n",
        "nobase.yaml": "base: configs/nope.yaml\nrows: [{name: base}]\n",
        "abspath.yaml": "name: /tmp/x\nrows: [{name: base}]\n",
        "env.yaml": "defaults: [configs/default.yaml]\nwandb:\n  group: ${oc.env:WANDB_API_KEY}\n",
        "raises_mod.py": "raise RuntimeError('boom at import')\n",
        "syntax_mod.py": "def broken(:\n",
        "imports_raising.yaml": "defaults: [configs/default.yaml]\nimports: [raises_mod]\n",
        "a_file": "not a folder\n",
        "overflow.yaml": "method: random\nrun_cap: 2\nparameters:\n  train.label_smoothing: "
                         "{distribution: log_uniform, min: -1, max: 800}\n",
        "lognormal.yaml": "method: random\nrun_cap: 2\nparameters:\n  train.lr: {distribution: log_normal, mu: 900, "
                          "sigma: 1}\n",
        "oneladder.yaml": "rows: [{name: base}]\nladder: [{name: S, model.d_model: 16}]\n",
        "imports_sweep.yaml": "base:\n  config: configs/default.yaml\n  overrides: ['imports=[raises_mod]']\n"
                              "rows: [{name: base}]\n",
        "other.yaml": f"name: other\nbase: {REPO / 'configs/default.yaml'}\nrows: [{{name: base}}]\n",
        "exit0_mod.py": "raise SystemExit(0)\n",
        "rowparam.yaml": "rows: [{name: base}, {name: d2, model.dropout: 0.2}]\nparameters:\n  model.dropout: "
                         "{values: [0.0, 0.1]}\n",
        "valvals.yaml": "parameters:\n  model.dropout: {value: 0.1, values: [0.0, 0.1]}\n",
        "rangevals.yaml": "parameters:\n  model.dropout: {values: [0.0, 0.1], min: 0.0, max: 0.2}\n",
        "octal.yaml": "model:\n  n_layers: 010\n",
        "sexagesimal.yaml": "train:\n  max_steps: 1:30\n",
        "octal_sweep.yaml": "parameters:\n  model.n_layers: {values: [010, 2]}\n",
        "empty.yaml": "# nothing yet\n",
        "negwarmup.yaml": f"base: {REPO / 'configs/default.yaml'}\nrows: [{{name: base}}, "
                          "{name: neg, train.schedule_args.warmup: -5}]\n",
        "banana.yaml": f"base: {REPO / 'configs/default.yaml'}\nrows: [{{name: base}}, "
                       "{name: p, trainer.precision: banana}]\n",
        "swept.yaml": f"base: {REPO / 'configs/default.yaml'}\nparameters:\n  model.dropout: {{values: [0.1, 0.2]}}\n",
        "rowsall.yaml": f"base: {REPO / 'configs/default.yaml'}\nrows: [{{name: a, model.dropout: 0.0}}, "
                        "{name: b, model.dropout: 0.2}]\n",
        "deep.yaml": "a: " + "[" * 5000 + "]" * 5000 + "\n",
    }.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "plan.json").write_text("{not json")
    (tmp_path / "listplan").mkdir()
    (tmp_path / "listplan" / "plan.json").write_text("[1, 2, 3]")
    for name, run in (("badresult", {"id": "r", "variant": "base", "seed": 0}),
                      ("badseed", {"id": "r", "variant": "base", "seed": "zero"})):
        (tmp_path / name / "runs" / "r").mkdir(parents=True)
        (tmp_path / name / "plan.json").write_text(json.dumps({"name": "x", "metric": {"name": "val/loss"},
                                                               "runs": [{**run, "run_dir": "runs/r"}]}))
        (tmp_path / name / "runs" / "r" / "result.json").write_text("[1, 2]")
    (tmp_path / "badckpt" / "checkpoints").mkdir(parents=True)
    (tmp_path / "badckpt" / "checkpoints" / "last.ckpt").write_bytes(b"PK\x03\x04 cut short")
    (tmp_path / "emptyckpt" / "checkpoints").mkdir(parents=True)
    (tmp_path / "emptyckpt" / "checkpoints" / "last.ckpt").write_bytes(b"")
    (tmp_path / "dirckpt" / "checkpoints" / "last.ckpt").mkdir(parents=True)
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("a researcher's notes\n")
    _owned(tmp_path / "arun", "run", None, {"config.yaml": "name: x\n", "result.json": "{}"})
    _owned(tmp_path / "asweep", "sweep", {"name": "s", "overrides": []}, {"plan.json": '{"name": "s", "runs": []}'})
    _owned(tmp_path / "ordered", "sweep", {"name": "s", "overrides": ["train.max_steps=3", "model.dropout=0.1"]},
           {"plan.json": '{"name": "s", "runs": []}'})  # a marker as written before sweep_identity: the list as given
    _owned(tmp_path / "garbagerun", "run", None, {"config.yaml": ": : [\n"})
    _owned(tmp_path / "strmetric", "sweep", {"name": "s", "overrides": []},
           {"plan.json": json.dumps({"name": "s", "metric": {"name": "val/loss"}, "runs": [
               {"id": "r", "variant": "base", "seed": 0, "run_dir": "runs/r"}]}),
            "runs/r/result.json": json.dumps({"status": "finished", "final": {"val/loss": "0.5"}})})
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    return tmp_path


MISTAKES = [
    # train
    (["train", "model.n_heads=5"], "model.n_heads=5 is not allowed; expected a divisor of model.d_model"),
    (["train", "model.positonal=learned"], "did you mean 'positional'"),
    (["train", "configs/nope.yaml"], "an existing YAML file"),
    (["train", "configs/default.yaml", "configs/default.yaml"], "one CONFIG file"),
    (["train", "lr=0.1"], "did you mean 'train.lr'"),
    (["train", "data.max_tokens=100"],
     "data.max_tokens=100 has no effect: task 'reverse' does not read data.max_tokens"),
    (["train", "trainer.extra.gradient_clip_vale=1"], "did you mean train.grad_clip"),
    (["train", "trainer.extra.max_steps=3"], "use train.max_steps instead"),
    # values only Lightning knows are refused by Lightning itself, before anything is written
    (["train", "trainer.extra.gradient_clip_algorithm=sideways", "output_dir=run"],
     "trainer.extra.gradient_clip_algorithm='sideways' is not allowed; expected a setting pytorch_lightning.Trainer"),
    (["train", "trainer.precision=banana", "output_dir=run"], "Precision 'banana' is invalid"),
    (["train", "trainer.devices=0", "output_dir=run"], "trainer.devices=0 is not allowed"),
    (["train", "trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches=0 is not allowed"),
    (["train", "trainer.limit_val_batches=-1"], "trainer.limit_val_batches=-1.0 is not allowed"),
    (["train", "train.eps=-1"], "train.eps=-1.0 is not allowed; expected a positive, finite epsilon"),
    (["train", "train.weight_decay=-0.5"], "train.weight_decay=-0.5 is not allowed"),
    (["train", "train.grad_clip=nan"], "train.grad_clip=nan is not allowed"),
    (["train", "train.schedule=constant", "train.lr=inf"], "train.lr=inf is not allowed"),
    (["train", "train.schedule=constant", "train.lr=0"], "train.lr=0.0 is not allowed"),
    (["train", "seed=-1"], "seed=-1 is not allowed"),
    (["describe", "configs/default.yaml", "seed=-1"], "seed=-1 is not allowed"),
    (["train", "train.schedule=constant", "train.lr=-1"], "train.lr=-1.0 is not allowed"),
    (["train", "seed=4294967296"], "seed=4294967296 is not allowed"),
    (["train", "model.positional=learned", "model.positional_args.max_len=4", "output_dir=run"],
     "LearnedPositional encodes at most 4 positions"),
    (["train", "model.dropout=1.5"], "model.dropout=1.5 is not allowed; expected a number in [0, 1)"),
    (["train", "model.n_heads=four"], "model.n_heads='four' is not allowed; expected a value of type Integer"),
    (["train", "--import", "no_such_module_xyz"], "imports='no_such_module_xyz'"),
    (["train", "model.positional=rope", "model.d_k=7", "model.d_v=7"], "model.d_k=7"),
    (["train", "model.attention=gqa", "model.attention_args.n_kv_heads=3"],
     "n_kv_heads=3 is not allowed; expected a divisor"),
    (["train", "configs/multi30k.yaml", "data.path=/nonexistent/folder"], "data.path='/nonexistent/folder'"),
    (["train", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["train", "model.tie_embeddings=false"],
     "model.embedding (tied | two_way | untied | factorized), which replaces it"),
    (["train", "model.mask=prefix_lm", "model.mask_args.prefix_len=-1"], "prefix_len=-1"),
    (["train", "data.batch_size=0"], "data.batch_size=0 is not allowed; expected a positive integer"),
    (["train", "data.path=x"], "data.path='x' has no effect: task 'reverse' does not read data.path"),
    # describe, components
    (["describe"], "CONFIG=None is not allowed; expected a config file"),
    (["describe", "configs/default.yaml", "--json", "model.d_ff=0"], "model.d_ff=0"),
    (["components", "colour"], "kind='colour'"),
    (["components", "--import", "no_such_module_xyz"], "imports='no_such_module_xyz'"),
    # sweep
    (["sweep", "nope.yaml"], "an existing sweep YAML file"),
    (["sweep", SWEEP, "--workers", "0"], "argument --workers: '0' is not allowed; expected a positive integer"),
    (["sweep", SWEEP, "--workers", "x"], "argument --workers: 'x' is not allowed; expected a positive integer"),
    (["sweep", SWEEP, "--workers", str(10**18)], "expected a positive integer up to 1,024"),
    (["sweep", SWEEP, "--runs-per-gpu", str(10**18)], "expected a positive integer up to 1024, or auto"),
    (["sweep", SWEEP, "model.n_heads"],
     "model.n_heads='model.n_heads' is not allowed; expected an override of the form"),
    (["sweep", SWEEP, "--dry-run", "lr=0.1"], "did you mean 'train.lr'"),
    (["sweep", "typo.yaml"], "metod='grid' is not allowed; expected a sweep key"),
    (["sweep", "noop.yaml", "--dry-run"], "data.max_tokens=1000 has no effect"),
    (["sweep", "heads.yaml", "--dry-run"], "model.n_heads=5 is not allowed"),
    (["sweep", "grid.yaml"], "what W&B's grid search takes"),
    (["sweep", "weights.yaml"],
     "probabilities=[0.5, 0.6] is not allowed; expected 2 non-negative numbers that sum to 1"),
    (["sweep", SWEEP, "--runs-per-gpu", "0"], "--runs-per-gpu='0' is not allowed"),
    (["sweep", SWEEP, "--gpus-per-run", "0.5"],
     "--gpus-per-run=0.5 is not allowed; expected nothing: it is for --backend ray or slurm"),
    (["sweep", SWEEP, "--backend", "slurm", "--cpus-per-run", "0.5"],
     "--cpus-per-run=0.5 is not allowed; expected a whole number of CPUs, at least 1"),
    (["sweep", SWEEP, "--partition", "gpu"], "--partition='gpu' is not allowed; expected nothing: it is for --backend "
     "slurm"),
    (["sweep", SWEEP, "--backend", "slurm", "--time-limit", "0"], "--time-limit=0 is not allowed; expected a positive "
     "integer"),
    (["sweep", SWEEP, "--backend", "kube"], "argument --backend: invalid choice: 'kube'"),
    (["sweep", SWEEP, "--address", "10.0.0.1:6379"], "--address='10.0.0.1:6379' is not allowed; expected nothing"),
    (["sweep", "margin.yaml"], "decide.margin=-0.1 is not allowed; expected a positive, finite margin"),
    (["sweep", "relative.yaml"], "decide.margin='2 percent' is not allowed; expected a positive number"),
    (["sweep", "budget.yaml"], "decide.max_seeds=2 is not allowed; expected at least the 3 seeds"),
    (["sweep", "noseeds.yaml"], "expected a listed seed parameter"),
    (["sweep", "seqrandom.yaml"], "no max_seeds for method random"),
    (["sweep", "decidekey.yaml"], "expected a mapping with margin, max_seeds, alpha and metrics"),
    (["sweep", SWEEP, "--max-seeds", "1"], "--max-seeds=1 is not allowed; expected an integer from 2 to 100"),
    (["sweep", SWEEP, "--max-seeds", "4"], "--max-seeds=4 is not allowed; expected a listed seed parameter"),
    (["sweep", "seeds.yaml", "--max-seeds", "5", "--backend", "wandb"], "no sequential design with --backend wandb"),
    (["train", "twice.yaml"], "the key 'model' is given twice (lines 1 and 5); keep one"),
    (["sweep", "rowtwice.yaml"], "the key 'model.d_ff' is given twice (lines 3 and 3)"),
    (["sweep", "metric.yaml"], "metric.name='val/los' is not allowed; expected a metric runs log"),
    (["sweep", "evaluate.yaml", "--dry-run"], "for task 'reverse', which has no text to read or write"),
    (["describe", "binary.yaml"],
     "config='binary.yaml' is not allowed; expected a YAML text file (this one is binary)"),
    (["sweep", "binary.yaml"], "SWEEP='binary.yaml' is not allowed; expected a YAML text file (this one is binary)"),
    (["describe", "defaults5.yaml"], "defaults=5 is not allowed; expected a config file, or a list of them"),
    (["describe", "tilde.yaml"], "the key '~' (line 1) is not a name"),
    (["describe", "bomb.yaml"], "its aliases expand to more than 100,000 values"),
    (["sweep", "bomb.yaml"], "its aliases expand to more than 100,000 values"),
    (["sweep", "overrides.yaml"], "base.overrides='train.max_steps=3' is not allowed; expected a list of key=value"),
    (["sweep", "nobase.yaml", "--dry-run"],
     "nobase.yaml: base.config='configs/nope.yaml' is not allowed; expected an existing YAML file (looked in "),
    (["sweep", "abspath.yaml"], "name='/tmp/x' is not allowed; expected a name, not a path"),
    (["train", "name=../../x"], "name='../../x' is not allowed; expected a name, not a path"),
    (["describe", "configs/default.yaml", "name=${nope}"], "expected an interpolation that resolves"),
    (["describe", "env.yaml"], "configs do not read environment variables"),
    (["describe", "configs/default.yaml", "model..d_model=4"],
     "model..d_model='4' is not allowed; expected a dotted key"),
    (["train", "output_dir=a_file"],
     "output_dir='a_file' is not allowed; expected a new folder or a run folder (this is a file)"),
    (["train", "output_dir=a_file/run"], "output_dir='a_file/run' is not allowed"),
    (["train", "output_dir=badckpt", *TINY], "badckpt/checkpoints/last.ckpt' is not allowed; expected a checkpoint to"),
    (["train", "output_dir=emptyckpt", *TINY],
     "emptyckpt/checkpoints/last.ckpt' is not allowed; expected a checkpoint"),
    (["sweep", "overflow.yaml", "--dry-run"], "train.label_smoothing.max=800 is not allowed; expected an exponent"),
    (["sweep", "lognormal.yaml", "--dry-run"], "train.lr.mu=900 is not allowed; expected an exponent"),
    (["sweep", "oneladder.yaml"], "ladder=['S'] is not allowed; expected at least two steps"),
    (["describe", "configs/default.yaml", "--import", "raises_mod"], "a module that imports cleanly (RuntimeError"),
    (["describe", "configs/default.yaml", "--import", "syntax_mod"], "a module that imports cleanly (line 1: Syn"),
    (["report", "garbage"], "garbage/plan.json' is not allowed; expected a JSON file as ablate writes it"),
    (["report", "listplan"], "expected a sweep's plan: a JSON mapping with a list of runs"),
    (["report", "badresult"],
     "result.json' is not allowed; expected a run's result: a JSON mapping (this one is a list)"),
    (["report", "badseed"], "expected a run as ablate plans it: a string id and variant, an integer seed or none"),
    (["components", ""], "kind='' is not allowed"),
    # report, sync, agent
    (["report", SWEEP], "a sweep that has been launched"),
    (["report", "/nonexistent/sweep.yaml"],
     "a sweep's directory (holding plan.json) or its sweep file: nothing is there"),
    (["sync", "/nonexistent/run"], "a sweep file, a sweep directory or a run directory"),
    (["agent", "abc"], "SWEEP_ID='abc' is not allowed; expected entity/project/id"),
    (["agent", "a/b/c"], "a configured W&B API key"),
    (["agent", "a/b/c", "--count", "0"], "argument --count: '0' is not allowed; expected a positive integer"),
    # a wrong place to write (issue 27): the root, a file, a folder of another kind or sweep, inside a run
    (["sweep", SWEEP, "--out", "/", "--dry-run"], "--out='/' is not allowed; expected a new folder or a sweep folder, "
     "not the root"),
    (["sweep", SWEEP, "--out", "arun"], "--out='arun' is not allowed; expected a new folder or a sweep folder (this is "
     "a run folder"),
    (["sweep", SWEEP, "--out", "notes"], "(this is a folder of files ablate did not write"),
    (["sweep", SWEEP, "--out", "a_file/sweep"], "(its parent"),
    (["sweep", "other.yaml", "--out", "asweep"], "belongs to another sweep: name: 's' -> 'other'"),
    (["sweep", SWEEP, "--out", "asweep", "model.dropout=0.3"], "belongs to another sweep: overrides: {} -> "
     "{'model': {'dropout': 0.3}}"),
    (["sweep", SWEEP, "--dry-run", "--out", "ordered", "model.dropout=0.2", "train.max_steps=3"],
     "belongs to another sweep: overrides: {'train': {'max_steps': 3}, 'model': {'dropout': 0.1}} -> "
     "{'model': {'dropout': 0.2}, 'train': {'max_steps': 3}}"),
    (["sweep", SWEEP, "--out", "arun/sweep"], "not a folder inside the run folder"),
    (["train", *TINY, "output_dir=asweep"], "output_dir='asweep' is not allowed; expected a new folder or a run folder "
     "(this is a sweep folder"),
    (["train", *TINY, "output_dir=arun/inner"], "not a folder inside the run folder"),
    (["train", *TINY, "output_dir=notes"], "(this is a folder of files ablate did not write"),
    (["train", *TINY, "output_dir=garbagerun"], "garbagerun/config.yaml' is not allowed; expected a run's config.yaml "
     "as ablate writes it"),
    (["train", *TINY, "output_dir=dirckpt"], "last.ckpt' is not allowed; expected a checkpoint to resume from (this is "
     "a folder)"),
    (["evaluate", "garbagerun"], "garbagerun/config.yaml' is not allowed; expected a run's config.yaml"),
    (["report", "strmetric"], "expected a run's result whose final metrics are numbers (this one gives "
     "val/loss='0.5')"),
    # a sweep read as a whole; numbers YAML 1.1 and 1.2 read differently
    (["sweep", "rowparam.yaml"], "rows[1].model.dropout=0.2 is not allowed; expected a key that no parameter sweeps"),
    (["sweep", "valvals.yaml"], "expected one of value (a constant), values (a list) or min and max (a range): "
     "this one gives value and values"),
    (["sweep", "rangevals.yaml"], "this one gives values and min"),
    (["describe", "octal.yaml"], "010 is octal to YAML 1.1 (8) and decimal to YAML 1.2 (10)"),
    (["describe", "sexagesimal.yaml"], "1:30 is a number in base 60 to YAML 1.1 (90) and text to YAML 1.2"),
    (["sweep", "octal_sweep.yaml"], "010 is octal to YAML 1.1 (8)"),
    (["train", "model.n_layers=010"], "model.n_layers='010' is not allowed; expected a value read the same by every"),
    (["sweep", SWEEP, "--dry-run", "train.max_steps=1:30"], "1:30 is a number in base 60 to YAML 1.1 (90)"),
    (["sweep", "swept.yaml", "--dry-run", "model.dropout=0.3"], "model.dropout='0.3' is not allowed; expected a key "
     "the sweep does not set in every run (parameters.model.dropout in swept.yaml sets it, so this override would "
     "change no run)"),
    (["sweep", "seeds.yaml", "--dry-run", "seed=5"], "(parameters.seed in seeds.yaml sets it"),
    (["sweep", "rowsall.yaml", "--dry-run", "model.dropout=0.3"], "(every row (a, b) in rowsall.yaml sets it"),
    # checked before the first write
    (["sweep", "negwarmup.yaml"], "negwarmup.yaml, run 'neg': train.schedule_args.warmup=-5 is not allowed"),
    (["sweep", "banana.yaml"], "banana.yaml, run 'p': trainer.precision='banana' is not allowed; expected a setting "
     "pytorch_lightning.Trainer accepts"),
    (["train", *TINY, "train.schedule_args.warmup=-5", "output_dir=run"],
     "train.schedule_args.warmup=-5 is not allowed"),
    # bounds, and no 44M-parameter run by accident
    (["train", "configs/default.yaml", "logger=none", "model.n_layers=100", "model.d_model=65536", "model.n_heads=64",
      "model.d_ff=1048576", "output_dir=huge"], "model='32,642,120,024,064 parameters' is not allowed; expected a "
     "model that fits in"),
    (["describe", "configs/default.yaml", "model.n_layers=99999999999999999999999999"],
     "model.n_layers=99999999999999999999999999 is not allowed; expected a positive integer up to 1,000"),
    (["train", "train.max_steps=10000000000000"], "train.max_steps=10000000000000 is not allowed"),
    (["train", "trainer.attention_kernel=flash"], "trainer.attention_kernel='flash' is not allowed; expected one "
     "of sdpa, flex"),
    (["train", "data.max_len=100000000"], "data.max_len=100000000 is not allowed"),
    (["train", "empty.yaml"], "CONFIG='empty.yaml' is not allowed; expected a config that sets something"),
    (["train", "empty.yaml", "output_dir=run"], "expected a config that sets something"),
    # one shape of refusal
    (["describe", "deep.yaml"], "nest deeper than Python's recursion limit"),
    (["describe", "loop.yaml"], "config='loop.yaml' is not allowed; expected an existing YAML file"),
    (["describe", "configs/default.yaml", "--import", "exit0_mod"], "imports='exit0_mod' is not allowed; expected a "
     "module that imports without exiting (it called sys.exit(0))"),
    (["train", *TINY, "--import", "exit0_mod"], "expected a module that imports without exiting"),
    (["sync", "arun"], "DIR='arun' is not allowed; expected a folder holding offline W&B runs not yet uploaded"),
    # top level
    (["trian"], "'trian' is not a command; expected one of train"),
    (["frobnicate"], "'frobnicate' is not a command"),
]

RUN_MISTAKES = [  # on a run directory: {run} translation, {lm} language model, {synthetic} the embedded task
    (["evaluate", "/nonexistent/run"], "RUN_DIR='/nonexistent/run' is not allowed; expected a run directory"),
    (["evaluate", "{run}", "--beam", "0"], "argument --beam: '0' is not allowed; expected a positive integer"),
    (["evaluate", "{run}", "--device", "gpu"], "--device='gpu' is not allowed; expected cpu, cuda or cuda:N"),
    (["evaluate", "{synthetic}"], "has no tokenizer"),
    (["evaluate", "{run}", "--average-last", "9"], "--average-last=9"),
    (["evaluate", "{lm}", "--lengths", "0"], "--lengths='0'"),
    (["evaluate", "{run}", "--split", "train"], "argument --split: invalid choice: 'train'"),
    (["generate", "{run}"], "the following arguments are required: --prompt"),
    (["generate", "{lm}", "--prompt", " "], "--prompt=' ' is not allowed; expected text with at least one token"),
    (["generate", "{lm}", "--prompt", "hi", "--temperature", "-1"], "argument --temperature: '-1' is not allowed"),
    (["attention", "{synthetic}", "--text", "hi"], "--text='hi' is not allowed; expected symbols as whole numbers"),
    (["attention", "{run}", "--text", " "], "--text=' ' is not allowed"),
    (["train", "configs/default.yaml", "output_dir={synthetic}", "model.dropout=0.3"],
     "expected a run directory of this config or a new one: it holds a finished run of another config ("),
    (["attention", "{lm}", "--text", "hi", "--out", "{lm}/config.yaml"], "config.yaml' is not allowed; expected a new "
     ".png file or a PNG ablate drew (the name must end in .png)"),
    (["attention", "{lm}", "--text", "hi", "--out", "{lm}/checkpoints/a.png"], "not inside the run folder"),
    (["attention", "{lm}", "--text", "hi", "--out", "{lm}"], "expected a new .png file"),
    (["attention", "{lm}", "--text", "hi", "--out", "a_file/a.png"], "(its parent"),
    (["attention", "{lm}", "--text", "hi", "--out", "/a.png"], "not in the root of the file system"),
    (["generate", "{lm}", "--prompt", "hi", "--max-new-tokens", "1000000000000"],
     "argument --max-new-tokens: '1000000000000' is not allowed; expected a non-negative integer up to 100,000"),
    (["generate", "{lm}", "--prompt", "hi", "--seed", "18446744073709551616"],
     "argument --seed: '18446744073709551616' is not allowed; expected a non-negative integer up to 4,294,967,295"),
    (["evaluate", "{lm}", "--lengths", "1,100000"], "--lengths='1,100000' is not allowed"),
    (["evaluate", "{run}", "--beam", "100000000"],
     "argument --beam: '100000000' is not allowed; expected a positive integer up to"),
    (["evaluate", "{run}", "--alpha", "inf"], "argument --alpha: 'inf' is not allowed; expected a finite number >= 0"),
    # issue 27, cause 4: a text is bounded by the positions the run's model can encode (learned: 16)
    (["generate", "{learned}", "--prompt", " ".join(map(str, range(3, 20)))],
     "expected text the run's model can encode: this is 17 tokens, and LearnedPositional encodes at most 16 positions"),
    (["attention", "{learned}", "--text", " ".join(map(str, range(3, 20))), "--out", "a.png"],
     "--text='3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19' is not allowed; expected text the run's model can encode"),
    (["attention", "{learned}", "--text", "3 4", "--target", " ".join(map(str, range(3, 19))), "--out", "a.png"],
     "this is 16 tokens and 1 more, and LearnedPositional encodes at most 16 positions"),
]


def _files(work: Path) -> list[str]:
    """Every file and folder under ``work`` (its symlinks not followed): what a refused command must leave as it was."""
    return sorted(str(p.relative_to(work)) for p in work.rglob("*") if not any(q.is_symlink() for q in
                                                                             (p, *p.parents) if q != work and
                                                                             work in q.parents))


def _check(argv: list[str], message: str, capsys, work: Path) -> None:
    before = _files(work)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("ablate: error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert "Traceback" not in err
    assert _files(work) == before  # nothing written, at any depth


@pytest.mark.parametrize("argv,message", MISTAKES, ids=[" ".join(a) for a, _ in MISTAKES])
def test_a_mistake_is_one_line_exit_2_and_writes_nothing(argv, message, work, capsys):
    _check(argv, message, capsys, work)


@pytest.mark.slow
@pytest.mark.parametrize("argv,message", RUN_MISTAKES, ids=[" ".join(a) for a, _ in RUN_MISTAKES])
def test_a_mistake_about_a_run_is_one_line_too(argv, message, work, capsys, run_dir, lm_run_dir, synthetic_run,
                                               learned_run):
    dirs = {"run": run_dir, "lm": lm_run_dir, "synthetic": synthetic_run, "learned": learned_run}
    _check([a.format(**dirs) for a in argv], message, capsys, work)


def test_a_text_as_long_as_the_model_encodes_is_drawn_and_translated(learned_run, work, capsys):
    """The bound is the model's own: 16 source tokens are drawn (their translation's last token, which has no position
    as a decoder input, left out), and 15 target tokens after the BOS; one more is refused (RUN_MISTAKES)."""
    sixteen = " ".join(map(str, range(3, 19)))
    assert main(["attention", str(learned_run), "--text", sixteen, "--out", "a.png"]) == 0
    assert main(["attention", str(learned_run), "--text", "3 4", "--target", sixteen.rsplit(" ", 1)[0], "--out",
                 "b.png"]) == 0
    assert main(["generate", str(learned_run), "--prompt", sixteen]) == 0
    assert (work / "a.png").is_file() and (work / "b.png").is_file()


def test_there_are_at_least_a_hundred_of_them():
    assert len(MISTAKES) + len(RUN_MISTAKES) >= 100


def test_a_configs_imports_are_named_before_they_run(work, capsys):
    """A config with imports runs code: describe says which module, and from which file, before importing it."""
    assert main(["describe", "imports_raising.yaml"]) == 2
    note, error = capsys.readouterr().err.splitlines()
    assert note == ("ablate: note: importing raises_mod (named by imports_raising.yaml's imports: a config's imports "
                    "run code)")
    assert error.startswith("ablate: error: imports_raising.yaml: imports='raises_mod'") and "boom at import" in error


def test_a_sweeps_imports_are_named_before_its_dry_run_runs_them(work, capsys, monkeypatch):
    monkeypatch.setattr("ablate.config.load._announced", set())  # each module is announced once per process
    assert main(["sweep", "imports_sweep.yaml", "--dry-run"]) == 2
    note, error = capsys.readouterr().err.splitlines()
    assert note.startswith("ablate: note: importing raises_mod") and "a config's imports run code" in note
    assert error.startswith("ablate: error: ") and "boom at import" in error


def test_a_bogus_wandb_mode_is_refused_before_anything_is_written(work, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "bogus")
    _check(["train", "output_dir=run"], "environment: WANDB_MODE='bogus' is not allowed", capsys, work)


def test_a_sweep_of_runs_w_and_b_would_refuse_is_refused_before_its_folder(work, capsys, monkeypatch):
    monkeypatch.setattr("ablate.runs.wandb.has_api_key", lambda: False)
    _check(["sweep", SWEEP, "logger=wandb", "wandb.mode=online"], "needs a W&B API key", capsys, work)


def test_a_read_only_folder_is_refused_for_a_run_and_a_sweep(work, capsys, monkeypatch):
    """Root writes anywhere, so read-only is what os.access says (a read-only mount says so to root too)."""
    import os

    (work / "ro").mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if "ro" in str(path) else real(path, mode))
    _check(["train", "output_dir=ro", *TINY], "output_dir='ro' is not allowed; expected a folder ablate can write in",
           capsys, work)
    _check(["sweep", SWEEP, "--out", "ro"], "--out='ro' is not allowed; expected a folder ablate can write in",
           capsys, work)


def test_options_and_overrides_in_any_order(work, capsys):
    assert main(["sweep", "--dry-run", SWEEP, "model.dropout=0.3"]) == 0
    assert main(["sweep", SWEEP, "model.dropout=0.3", "--dry-run"]) == 0
    capsys.readouterr()
    assert main(["describe", "--json", "configs/default.yaml", "model.d_ff=128"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["model"]["d_ff"] == 128


def test_a_sweeps_overrides_in_any_order_are_the_same_sweep(work, capsys):
    """Issue 27: the sweep folder claimed by `s.yaml train.max_steps=3 model.dropout=0.1` is the sweep of the same
    overrides in any order (other values are refused: MISTAKES)."""
    before = _files(work)
    assert main(["sweep", SWEEP, "--dry-run", "--out", "ordered", "model.dropout=0.1", "train.max_steps=3"]) == 0
    assert main(["sweep", SWEEP, "--dry-run", "--out", "ordered", "train.max_steps=3", "model.dropout=0.1"]) == 0
    assert _files(work) == before


def test_version_and_help(capsys):
    assert main(["--version"]) == 0 and capsys.readouterr().out == f"ablate {ablate.__version__}\n"
    assert main(["--help"]) == 0 and "sweep" in capsys.readouterr().out


def test_an_unexpected_error_is_one_line_too(work, capsys, monkeypatch):
    import ablate.cli.run as commands

    monkeypatch.setattr(commands, "split_items", lambda *a: 1 / 0)
    assert main(["describe", "configs/default.yaml"]) == 1
    err = capsys.readouterr().err
    assert err == "ablate: internal error: ZeroDivisionError: division by zero (set ABLATE_TRACEBACK=1 to see where)\n"




# Cause 1 of issue 27, closed for every writer: each command that writes a folder refuses each wrong place, in one
# line, before it writes anything. A new writer is added here with its command line; a new kind of wrong place too.
WRITERS = {
    "train": lambda place: ["train", *TINY, f"output_dir={place}"],
    "sweep": lambda place: ["sweep", SWEEP, "--out", place],
}
WRONG_PLACES = {  # place -> what the refusal says
    "a_file": "(this is a file)",
    "a_file/child": "(its parent",
    "notes": "(this is a folder of files ablate did not write",
    "arun/inside": "not a folder inside the run folder",
    "asweep/runs/x/inside": "not a folder inside the run folder",  # a sweep's run is a run: nothing else writes in it
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("place", sorted(WRONG_PLACES))
def test_no_writer_writes_into_a_wrong_place(writer, place, work, capsys):
    if place.startswith("asweep/runs/x"):
        _owned(work / "asweep" / "runs" / "x", "run", None, {"result.json": "{}"})
    _check(WRITERS[writer](place), WRONG_PLACES[place], capsys, work)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_no_writer_writes_into_a_folder_of_the_other_kind(writer, work, capsys):
    other = "asweep" if writer == "train" else "arun"
    _check(WRITERS[writer](other), f"(this is a {'sweep' if writer == 'train' else 'run'} folder", capsys, work)


def test_a_run_being_trained_elsewhere_is_refused_in_the_same_shape(work, capsys):
    from ablate.runs.lock import EXIT_LOCKED, run_lock

    with run_lock(work / "arun"):
        before = _files(work)
        assert main(["train", "configs/default.yaml", *TINY, "output_dir=arun"]) == EXIT_LOCKED
    err = capsys.readouterr().err
    assert err.startswith("ablate: error: ") and err.count("\n") == 1, err
    assert _files(work) == before


def test_a_run_being_trained_is_not_evaluated_into(work, capsys, synthetic_run):
    """Issue 27, cause 1: evaluate writes its scores into the run's result.json; while a trainer holds the run (and
    rewrites that file when it ends) it is refused in the same shape as a second trainer, before anything loads."""
    from ablate.runs.lock import EXIT_LOCKED, run_lock

    result = (synthetic_run / "result.json").read_bytes()
    with run_lock(synthetic_run):
        assert main(["evaluate", str(synthetic_run)]) == EXIT_LOCKED
    err = capsys.readouterr().err
    assert err == f"ablate: error: {synthetic_run} is being trained by another process\n"
    assert (synthetic_run / "result.json").read_bytes() == result


def test_a_command_that_something_exits_in_the_middle_of_is_no_success(work, capsys, monkeypatch):
    """sys.exit(0) from a user's module or a library, once the command has started, is not the command's success."""
    import ablate.cli.run as commands

    def exits(*args):
        raise SystemExit(0)

    monkeypatch.setattr(commands, "split_items", exits)
    assert main(["describe", "configs/default.yaml"]) == 1
    assert "called sys.exit(0) before it was done" in capsys.readouterr().err
