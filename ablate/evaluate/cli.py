"""Subcommands that read a trained run: ``evaluate`` (BLEU), ``generate`` (sample or translate),
``attention`` (PNG grid).

    ablate evaluate RUN_DIR [--split test] [--beam 4] [--alpha 0.6] [--average-last K]   (translation: BLEU)
    ablate evaluate RUN_DIR [--lengths 1,2,4]                                          (language model: lengths)
    ablate generate RUN_DIR --prompt "..." [--max-new-tokens 200] [--temperature 0.8] [--top-k 50] [--seed 0]
    ablate attention RUN_DIR --text "..." [--target "..."] [--out PNG]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ablate.errors import COMMAND_LINE, ConfigError
from ablate.options import Number


def _quiet() -> None:
    """No progress bars from ``datasets`` while a run's splits are read back: the output is the result."""
    import datasets

    datasets.disable_progress_bars()


# Bounds on what a command is asked to compute: each generated token is a forward pass, each beam a copy of the
# decoder's state, each length factor a pass over max_len times that many tokens; past these the command runs until
# it is killed or out of memory, on any machine.
MAX_NEW_TOKENS = 100_000
MAX_BEAM = 1_000
MAX_BATCH_TOKENS = 1 << 24
MAX_LENGTH_FACTOR = 64
BEAM = Number(1, MAX_BEAM, integer=True, note="1: greedy")
AVERAGE = Number(0, integer=True, note="0: the checkpoint alone")

# The options that apply to one kind of run alone, by command, with the default each takes there: given for a run of
# the other kind, one is refused, not ignored (a --temperature on a translation run, a --target on a language model).
# They are parsed with no default, so that an option given is told from one left out.
FOR_KIND = {
    "evaluate": {"encoder_decoder": {"split": "test", "beam": 4, "alpha": 0.6, "batch_tokens": 8192},
                 "decoder_only": {"lengths": "1,2,4"}},
    "generate": {"encoder_decoder": {"beam": 4},
                 "decoder_only": {"max_new_tokens": 200, "temperature": 0.8, "top_k": 50, "seed": 0}},
    "attention": {"encoder_decoder": {"target": None}, "decoder_only": {}},
}
KINDS = {"encoder_decoder": "translation runs (encoder-decoder)", "decoder_only": "language-model runs (decoder-only)"}


def option(name: str) -> str:
    """``batch_tokens`` -> ``--batch-tokens``."""
    return "--" + name.replace("_", "-")


def kind_of(command: str, name: str) -> str | None:
    """The architecture whose runs ``command``'s option ``name`` applies to alone; None: it applies to every run."""
    return next((arch for arch, options in FOR_KIND[command].items() if name in options), None)


def for_kind(args: argparse.Namespace, command: str, arch: str) -> None:
    """Fill in the defaults of the options that apply to a run of ``arch``, after refusing any given that do not.

    Raises:
        ConfigError: naming the first option given that is for the other kind of run.
    """
    for kind, options in FOR_KIND[command].items():
        for name, default in options.items():
            if kind != arch and getattr(args, name) is not None:
                raise ConfigError(option(name), getattr(args, name), f"nothing for this run: {option(name)} is for "
                                  f"{KINDS[kind]}, and {args.run_dir} is one of {KINDS[arch]}", COMMAND_LINE)
            if kind == arch and getattr(args, name) is None:
                setattr(args, name, default)


def _factors(text: str) -> list[int]:
    try:
        factors = [int(f) for f in text.split(",")]
    except ValueError:
        factors = []
    if not factors or any(not 1 <= f <= MAX_LENGTH_FACTOR for f in factors):
        raise ConfigError("--lengths", text, f"comma-separated whole multiples of data.max_len from 1 to "
                          f"{MAX_LENGTH_FACTOR}, e.g. 1,2,4",
                          COMMAND_LINE)
    return factors


def cmd_evaluate(args: argparse.Namespace) -> int:
    """A translation run: translate, score, record; print sacreBLEU's line, then the translations' path.
    A language-model run: score the validation text at multiples of the training length; print each."""
    from ablate.evaluate.load import run_arch
    from ablate.runs.lock import run_lock

    _quiet()
    arch = run_arch(args.run_dir)
    for_kind(args, "evaluate", arch)
    with run_lock(Path(args.run_dir)):  # its scores go into result.json: not while a trainer rewrites it
        return _evaluate(args, arch)


def _evaluate(args: argparse.Namespace, arch: str) -> int:
    from ablate.evaluate.evaluate import evaluate_run
    from ablate.evaluate.lengths import evaluate_lengths, key

    if arch == "decoder_only":
        factors = _factors(args.lengths)
        out = evaluate_lengths(args.run_dir, factors=factors, checkpoint=args.checkpoint,
                               average_last=args.average_last, device=args.device)
        for f in factors:
            loss = out.get(key(f))
            reason = out["lengths"]["unsupported"].get(f"{f}x")
            print(f"{f}x ({f * out['lengths']['block']} tokens): " +
                  (f"val/loss {loss:.4f}, val/ppl {out[key(f, 'ppl')]:.2f}" if loss is not None
                   else f"cannot: {reason}"))
        return 0
    out = evaluate_run(args.run_dir, split=args.split, beam=args.beam, alpha=args.alpha, average_last=args.average_last,
                       batch_tokens=args.batch_tokens, checkpoint=args.checkpoint, device=args.device)
    print(out["decode"]["sacrebleu"])
    print(out["decode"]["translations"])
    return 0


def add_evaluate_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``evaluate`` on the ``ablate`` command's subparsers; its ``func`` is :func:`cmd_evaluate`."""
    p = subparsers.add_parser("evaluate", help="translation run: sacreBLEU of a split; language model: val loss at "
                                               "1x, 2x, 4x the training length")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (config.yaml, checkpoints/)")
    p.add_argument("--split", choices=["test", "val"], help="translation: test or val (default: test)")
    p.add_argument("--beam", type=BEAM, help="translation: beam size; 1 = greedy (default: 4, section 6.1)")
    p.add_argument("--alpha", type=Number(0), help="translation: length penalty exponent (default: 0.6)")
    p.add_argument("--batch-tokens", type=Number(1, MAX_BATCH_TOKENS, integer=True),
                   help="translation: source tokens per batch, all beams counted (default: 8192)")
    p.add_argument("--lengths", metavar="F,F,...",
                   help="language model: multiples of data.max_len to score the validation text at (default: 1,2,4)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    _weights_options(p)
    p.set_defaults(func=cmd_evaluate)
    return p


def cmd_generate(args: argparse.Namespace) -> int:
    """Print the prompt's continuation (LM run) or its translation (translation run)."""
    from ablate.evaluate.generate import generate_run
    from ablate.evaluate.load import run_arch

    _quiet()
    for_kind(args, "generate", run_arch(args.run_dir))
    print(generate_run(args.run_dir, args.prompt, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                       top_k=args.top_k or None, seed=args.seed, beam=args.beam, checkpoint=args.checkpoint,
                       average_last=args.average_last, device=args.device))
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    """Write the attention grid; print its path."""
    from ablate.evaluate.attention_plot import plot_attention
    from ablate.evaluate.load import run_arch

    _quiet()
    for_kind(args, "attention", run_arch(args.run_dir))
    print(plot_attention(args.run_dir, args.text, args.out, target=args.target, checkpoint=args.checkpoint))
    return 0


def _weights_options(p: argparse.ArgumentParser, average: bool = True) -> None:
    p.add_argument("--checkpoint", default=None, choices=["best", "last"],
                   help="which checkpoint (default: best, else last for a run that never validated)")
    if average:
        p.add_argument("--average-last", type=AVERAGE, default=0, metavar="K",
                       help="average the last K step checkpoints instead of --checkpoint (the paper: 5)")


def add_generate_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``generate``; its ``func`` is :func:`cmd_generate`."""
    p = subparsers.add_parser("generate",
                              help="sample text from an LM run, or translate a sentence with a translation run")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (config.yaml, checkpoints/)")
    p.add_argument("--prompt", required=True, help="text to continue (LM) or to translate")
    p.add_argument("--max-new-tokens", type=Number(0, MAX_NEW_TOKENS, integer=True),
                   help="LM: tokens to sample (default: 200)")
    p.add_argument("--temperature", type=Number(0, note="0: greedy"),
                   help="LM: sampling temperature; 0 = greedy (default: 0.8)")
    p.add_argument("--top-k", type=Number(0, integer=True, note="0: all"),
                   help="LM: sample among the k likeliest tokens; 0 = all (default: 50)")
    p.add_argument("--seed", type=Number(0, 2**32 - 1, integer=True, note="what numpy and torch take as a seed"),
                   help="LM: random seed of the sample (default: 0)")
    p.add_argument("--beam", type=BEAM, help="translation: beam size; 1 = greedy (default: 4)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    _weights_options(p)
    p.set_defaults(func=cmd_generate)
    return p


def add_attention_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``attention``; its ``func`` is :func:`cmd_attention`."""
    p = subparsers.add_parser("attention", help="draw every head's attention weights for one input as a PNG grid")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (config.yaml, checkpoints/)")
    p.add_argument("--text", required=True, help="the source sentence (translation) or text (LM)")
    p.add_argument("--target", default=None,
                   help="translation: the target to attend over (default: the model's translation)")
    p.add_argument("--out", default=None, help="the PNG to write (default: RUN_DIR/attention.png)")
    _weights_options(p, average=False)
    p.set_defaults(func=cmd_attention)
    return p
