"""``ablate generate``: see what a trained variant learned.

A language-model run continues the prompt by sampling (temperature, top-k, seeded); a translation
run translates it (beam search as in section 6.1, or greedy). A synthetic task's run reads and writes its
symbols as numbers: a reversal run given ``3 4 5 6`` answers ``6 5 4 3`` once it has learned.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ablate.config.schema import Arch
from ablate.decode import sample, translate
from ablate.errors import COMMAND_LINE, ConfigError
from ablate.metrics.bleu import detokenize
from ablate.evaluate.load import encode, inspect_task, lm_window, load_run_model


def lm_prompt_ids(prompt: str, tokenizer) -> list[int]:
    """The prompt as the LM's stream holds a text file: after an EOS (a line starts, as every line
    but the first does in training), each line's ids, lines separated by EOS."""
    ids = [tokenizer.eos_id]
    for i, line in enumerate(prompt.split("\n")):
        ids += ([tokenizer.eos_id] if i else []) + (tokenizer.encode(line) if line else [])
    return ids


def generate_run(
    run_dir: str | Path,
    prompt: str,
    *,
    max_new_tokens: int = 200,
    temperature: float = 0.8,
    top_k: int | None = 50,
    seed: int = 0,
    beam: int = 4,
    alpha: float = 0.6,
    checkpoint: str | None = None,
    average_last: int = 0,
    device: str | None = None,
) -> str:
    """Continue ``prompt`` with a language-model run, or translate it with a translation run.

    Args:
        run_dir: a finished (or checkpointed) run directory.
        prompt: text; for an LM a line break is a line break of the training text.
        max_new_tokens, temperature, top_k, seed: sampling (LM runs); temperature 0 is greedy.
        beam, alpha: beam search (translation runs); beam 1 is greedy.
        checkpoint, average_last: which weights (as for ``ablate evaluate``); checkpoint None: best, else last.
        device: where to run; default CUDA when available, else the CPU.

    Returns:
        The prompt and its continuation (LM), or the translation.

    Raises:
        ConfigError: not a run directory, a missing checkpoint, or a prompt with no tokens.
    """
    cfg, model, _ = load_run_model(run_dir, average_last=average_last, checkpoint=checkpoint, device=device)
    d = cfg.data
    data, text = inspect_task(cfg, run_dir)
    if cfg.model.arch == Arch.encoder_decoder:
        src = encode(text, prompt, "--prompt", model)
        (hypothesis,) = translate(model, [src], bos_id=d.bos_id, eos_id=d.eos_id, pad_id=d.pad_id, beam=beam,
                                  alpha=alpha)
        return detokenize([hypothesis], text)[0]
    if not prompt.strip():
        raise ConfigError("--prompt", prompt, "text with at least one token", COMMAND_LINE)
    try:
        ids = lm_prompt_ids(prompt, text)
    except ValueError as exc:  # a synthetic task's symbols: the message says what they read
        raise ConfigError("--prompt", prompt, str(exc), COMMAND_LINE) from None
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    lm_window(ids[1:], d.max_len, "--prompt")  # the note, for a prompt longer than the model reads at once
    new = sample(model, ids, max_new_tokens=max_new_tokens, context=d.max_len, temperature=temperature,
                 top_k=top_k, generator=generator)
    decode = getattr(data, "decode_text", text.decode)  # a text LM's lines; a synthetic task's symbols
    return decode(ids[1:] + new)  # without the leading EOS: the whole prompt, then what the model added
