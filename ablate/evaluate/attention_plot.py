"""``ablate attention``: every head of every layer, for one input, as a PNG grid.

Rows are layers (for a translation run: the encoder's self-attention, then the decoder's
self-attention, then its attention over the encoder), columns are heads; each cell is one
head's attention weights (queries down, keys across) as recorded by
:func:`ablate.attention_weights` during one forward pass in eval mode. A translation run attends
over its own translation of ``text`` (beam search) unless a ``target`` is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
from matplotlib.figure import Figure

from ablate.config.schema import Arch
from ablate.decode import translate
from ablate.errors import COMMAND_LINE, ConfigError
from ablate.evaluate.generate import lm_prompt_ids
from ablate.evaluate.load import encode, inspect_task, lm_window, load_run_model
from ablate.model import attention_weights
from ablate.model.inspect import too_long

LABELS_UP_TO = 40  # tokens: longer inputs get no tick labels
KINDS = {"self_attn": "self", "cross_attn": "cross"}
MODULE = re.compile(r"^(?P<stack>encoder|decoder)\.layers\.(?P<layer>\d+)\.(?P<kind>self_attn|cross_attn)$")


@dataclass
class Panel:
    """One row of the grid: one attention module's weights for the input, (h, T_q, T_k)."""

    title: str
    weights: torch.Tensor
    queries: list[str]
    keys: list[str]


def _pieces(text, ids: list[int]) -> list[str]:
    return [text.piece(i) for i in ids]


def collect(run_dir: str | Path, text: str, *, target: str | None = None, checkpoint: str | None = None,
            beam: int = 4) -> list[Panel]:
    """Run the model once on ``text`` and return its attention weights, one panel per module, in
    stack and layer order.

    Raises:
        ConfigError: not a run directory, a missing checkpoint, or a text with no tokens.
    """
    cfg, model, _ = load_run_model(run_dir, checkpoint=checkpoint, device="cpu")
    d = cfg.data
    _, tok = inspect_task(cfg, run_dir)
    if cfg.model.arch == Arch.encoder_decoder:
        src = encode(tok, text, "--text", model)
        if target is None:
            (tgt,) = translate(model, [src], bos_id=d.bos_id, eos_id=d.eos_id, pad_id=d.pad_id, beam=beam)
            if too_long(model, len(tgt) + 1):  # as decoded: BOS and all but the last token (it has no position)
                tgt = tgt[:-1]
        else:
            tgt = encode(tok, target, "--target", model, added=1)  # after the BOS
        tgt_in = [d.bos_id, *tgt]
        with torch.no_grad(), attention_weights(model) as found:
            model(torch.tensor([src]), torch.tensor([tgt_in]))
        sides = {"encoder": _pieces(tok, src), "decoder": _pieces(tok, tgt_in)}
    else:
        if not text.strip():
            raise ConfigError("--text", text, "text with at least one token", COMMAND_LINE)
        try:
            ids = lm_window(lm_prompt_ids(text, tok)[1:], d.max_len, "--text")  # its own tokens, no leading EOS
        except ValueError as exc:  # a synthetic task's symbols: the message says what they read
            raise ConfigError("--text", text, str(exc), COMMAND_LINE) from None
        with torch.no_grad(), attention_weights(model) as found:
            model(torch.tensor([ids]))
        sides = {"decoder": _pieces(tok, ids)}
    panels = []
    for name in sorted(found, key=_order):
        m = MODULE.match(name)
        if m is None:
            continue
        stack, layer, kind = m["stack"], int(m["layer"]), m["kind"]
        keys = sides["encoder"] if kind == "cross_attn" else sides[stack]
        panels.append(Panel(f"{stack} {KINDS[kind]} {layer + 1}", found[name][0].float(), sides[stack], keys))
    return panels


def _order(name: str) -> tuple:
    m = MODULE.match(name)
    if m is None:
        return (9, 0, name)
    stack_kind = {("encoder", "self_attn"): 0, ("decoder", "self_attn"): 1, ("decoder", "cross_attn"): 2}
    return (stack_kind[(m["stack"], m["kind"])], int(m["layer"]), name)


def draw(panels: list[Panel], title: str) -> Figure:
    """The grid: one row per panel, one column per head."""
    if not panels:
        raise ValueError("no attention weights were recorded")
    heads = max(p.weights.size(0) for p in panels)
    cell = 1.8 if max(len(p.keys) for p in panels) <= LABELS_UP_TO else 1.4
    fig = Figure(figsize=(0.8 + cell * heads, 0.6 + cell * len(panels)), layout="constrained")
    fig.suptitle(title, fontsize=10)
    axes = fig.subplots(len(panels), heads, squeeze=False)
    for r, panel in enumerate(panels):
        labels = len(panel.keys) <= LABELS_UP_TO and len(panel.queries) <= LABELS_UP_TO
        for h in range(heads):
            ax = axes[r][h]
            ax.set_xticks([])
            ax.set_yticks([])
            if h >= panel.weights.size(0):
                ax.axis("off")
                continue
            ax.imshow(panel.weights[h].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto",
                      interpolation="nearest")
            if r == 0:
                ax.set_title(f"head {h + 1}", fontsize=8)
            if h == 0:
                ax.set_ylabel(panel.title, fontsize=8)
            if labels and h == 0:  # the row's first head carries the token labels
                ax.set_yticks(range(len(panel.queries)), panel.queries, fontsize=6)
                ax.set_xticks(range(len(panel.keys)), panel.keys, fontsize=6, rotation=90)
    return fig


def plot_attention(run_dir: str | Path, text: str, out: str | Path | None = None, *, target: str | None = None,
                   checkpoint: str | None = None, beam: int = 4) -> Path:
    """Draw the attention of every head and layer of a run for ``text``; write a PNG.

    Args:
        run_dir: a run directory.
        text: the source sentence (translation) or the text (LM).
        out: the PNG path (default ``<run_dir>/attention.png``).
        target: for a translation run, the target sentence to attend over (default: the model's
            own translation, by beam search with ``beam``).
        checkpoint: ``best`` or ``last``; None: best, else last.

    Returns:
        The PNG's path.

    Raises:
        ConfigError: ``out`` is not a place for a figure (:func:`ablate.runs.owner.check_figure`), before any work.
    """
    from ablate.runs.owner import check_figure

    run_dir = Path(run_dir)
    path = Path(out) if out else run_dir / "attention.png"
    check_figure(path, key="--out")
    panels = collect(run_dir, text, target=target, checkpoint=checkpoint, beam=beam)
    fig = draw(panels, f"{run_dir.name}: {text[:80]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=150)
    tmp.replace(path)
    return path
