"""Padding waste on Multi30k train: ablate's token batching against random fixed-size batches.

Token batching is the real path of ``ablate train configs/multi30k.yaml``: the ``parallel_text``
task (shared BPE vocabulary trained into a temporary cache dir), its TokenBatchSampler
(``data.max_tokens``) and collator; the padded tensors are counted as the model gets them
(``src_ids`` (B, S); ``tgt_ids`` (B, T) = [BOS] + y, whose padding equals that of ``labels``).
The baseline: shuffled batches with a fixed number of sentences, equal to the token batches'
mean, through the same collator. Padding % = pad slots / all slots; goal: <= 5 %.

    python benchmarks/padding.py [--quick] [--data PATH]
"""

from __future__ import annotations

import tempfile

import numpy as np

import _common as C
import ablate
from ablate.data import build_task

DATA = "/work/shared/data/multi30k"


def count(batches) -> dict[str, float]:
    """Padding share of source, target and both, over collated batches; plus batch statistics."""
    real = {"src": 0, "tgt": 0}
    slots = {"src": 0, "tgt": 0}
    sizes, budgets = [], []
    for b in batches:
        for side, key in (("src", "src_ids"), ("tgt", "tgt_ids")):
            real[side] += int((b[key] != 0).sum())
            slots[side] += b[key].numel()
        sizes.append(b["src_ids"].size(0))
        budgets.append(max(b["src_ids"].numel(), b["tgt_ids"].numel()))
    pct = {side: 100 * (1 - real[side] / slots[side]) for side in real}
    pct["combined"] = 100 * (1 - sum(real.values()) / sum(slots.values()))
    return {"padding_pct": pct, "batches": len(sizes), "sentences_per_batch": float(np.mean(sizes)),
            "slots_per_batch": float(np.mean(budgets)), "real_tgt_tokens": real["tgt"]}


def random_batches(data, size: int, seed: int):
    """Shuffled fixed-size batches of ``size`` sentences, collated like the token batches."""
    ds = data.encoded("train").select_columns(["src_ids", "tgt_ids"])
    order = np.random.default_rng(seed).permutation(len(ds))
    for i in range(0, len(order) - size + 1, size):
        rows = ds[order[i : i + size].tolist()]
        yield data.collate(list(zip(rows["src_ids"], rows["tgt_ids"])))


def main() -> None:
    args = C.parse_args(__doc__, lambda p: p.add_argument("--data", default=DATA))
    epochs = 1 if args.quick else 3
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="ablate-bench-") as cache:
        overrides = [f"data.path={args.data}", f"data.cache_dir={cache}"]
        cfg = ablate.load_config(C.REPO / "configs/multi30k.yaml", overrides)
        settings = {"data": args.data, "config": "configs/multi30k.yaml", "max_tokens": cfg.data.max_tokens,
                    "max_len": cfg.data.max_len, "vocab_size": cfg.data.vocab_size, "epochs": epochs}
        info = C.print_header("padding: token batching vs random fixed-size batches (Multi30k train)", settings)
        data = build_task(cfg)
        data.prepare_data()
        data.setup("fit")
        print(f"train pairs after the length filter: {len(data.encoded('train'))}")
        rows, results = [], {}
        loader = data.train_dataloader()
        for epoch in range(epochs):
            loader.sampler.set_epoch(epoch)
            token = count(loader)
            fixed = count(random_batches(data, round(token["sentences_per_batch"]), seed=epoch))
            results[f"epoch {epoch}"] = {"token_batching": token, "random_fixed_size": fixed}
            for name, r in (("token batching", token), ("random fixed-size", fixed)):
                p = r["padding_pct"]
                rows.append([epoch, name, r["batches"], r["sentences_per_batch"], r["slots_per_batch"],
                             p["src"], p["tgt"], p["combined"]])
    print(C.table(["epoch", "batching", "batches", "sent/batch", "slots/batch", "src pad %", "tgt pad %",
                   "combined pad %"], rows))
    token = [r["token_batching"]["padding_pct"] for r in results.values()]
    fixed = [r["random_fixed_size"]["padding_pct"] for r in results.values()]
    summary = {side: {"token_batching": C.median([t[side] for t in token]),
                      "random_fixed_size": C.median([f[side] for f in fixed])} for side in ("src", "tgt", "combined")}
    for side, s in summary.items():
        print(f"{side:>8}: token batching {s['token_batching']:.2f} % padding, random fixed-size "
              f"{s['random_fixed_size']:.2f} % ({s['random_fixed_size'] / max(s['token_batching'], 1e-9):.1f}x more)"
              + (" -- goal <= 5 %" if side == "combined" else ""))
    results["summary_median_over_epochs"] = summary
    C.emit("padding", info, settings, results)


if __name__ == "__main__":
    main()
