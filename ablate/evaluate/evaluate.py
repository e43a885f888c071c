"""``ablate evaluate``: translate a split with a trained run's model and score it with sacreBLEU.

Writes ``<run_dir>/translations.<split>.txt`` (one hypothesis per line, in the split's order)
and merges ``<split>/bleu``, ``<split>/bleu_signature`` and the ``decode`` settings into the
run's ``result.json`` (and, when the run logged to W&B, into that run's summary). Decoding runs in fp32.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


from ablate.decode import translate
from ablate.metrics.bleu import corpus_bleu, detokenize
from ablate.evaluate.load import load_run_model, translation_task
from ablate.runs.files import write_atomic, write_result
from ablate.runs.wandb import record_scores


def evaluate_run(
    run_dir: str | Path,
    *,
    split: str = "test",
    beam: int = 4,
    alpha: float = 0.6,
    average_last: int = 0,
    batch_tokens: int = 8192,
    max_len_a: float = 1,
    max_len_b: int = 50,
    checkpoint: str | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """Translate ``split`` with a run's model, write the translations, score them, record the score.

    Args:
        run_dir: a run directory (config.yaml, checkpoints/, result.json).
        split: the data module's split key: ``test`` or ``val``.
        beam: beam size; 1 decodes greedily. alpha: the length penalty (section 6.1: 4 and 0.6).
        average_last: average the last k step checkpoints (0: use ``checkpoints/<checkpoint>.ckpt``).
        batch_tokens: source tokens per decoding batch, counting every beam.
        max_len_a, max_len_b: at most ``a * |x| + b`` output tokens (section 6.1: |x| + 50).
        checkpoint: which single checkpoint: ``best`` (lowest val/loss) or ``last``; None: best, else last.
        device: where to decode; default CUDA when available, else the CPU.

    Returns:
        What was merged into result.json: ``<split>/bleu``, ``<split>/bleu_signature`` and ``decode``
        (the settings, the checkpoints, timing, sacreBLEU's report line and the translations' path).

    Raises:
        ConfigError: not a run directory, not a translation run, or a missing checkpoint.
    """
    run_dir = Path(run_dir)
    cfg, model, paths = load_run_model(run_dir, average_last=average_last, checkpoint=checkpoint, device=device)
    data = translation_task(cfg)
    sources, references = list(data.encoded(split)["src_ids"]), data.references(split)
    settings = dict(beam=beam, alpha=alpha, max_len_a=max_len_a, max_len_b=max_len_b)
    start = time.perf_counter()
    hypotheses = translate(model, sources, bos_id=cfg.data.bos_id, eos_id=cfg.data.eos_id,
                           pad_id=cfg.data.pad_id, batch_tokens=batch_tokens, **settings)
    seconds = time.perf_counter() - start
    texts = detokenize(hypotheses, data.tokenizer)
    path = run_dir / f"translations.{split}.txt"
    write_atomic(path, "".join(line + "\n" for line in texts))
    bleu = corpus_bleu(texts, references)
    entries = {
        f"{split}/bleu": bleu.score,
        f"{split}/bleu_signature": bleu.signature,
        "decode": {
            "split": split, **settings, "search": "beam" if beam > 1 else "greedy",
            "checkpoints": [p.name for p in paths], "average_last": average_last, "precision": "fp32",
            "device": str(next(model.parameters()).device), "sentences": len(texts), "seconds": seconds,
            "sacrebleu": bleu.line,
            "translations": str(path),
        },
    }
    write_result(run_dir, entries, merge=True)
    record_scores(cfg, run_dir, {k: v for k, v in entries.items() if k != "decode"})  # the W&B run too, if it has one
    return entries
