"""The Lightning system of a seed array: K members of one config, trained as one model (:mod:`ablate.train.fused`).

Each member gets what its solo run (:class:`ablate.train.system.TransformerSystem`) gets: the same label-smoothed
cross-entropy over the positions its mask lets be scored, its auxiliary losses, gradient clipping at
``train.grad_clip`` on *its own* gradient norm, Adam and the schedule (elementwise over the stacked tensors: each
member's own state), and validation on its own held-out batches (plain NLL, perplexity, accuracy).

A member whose training loss turns NaN or infinite is *out* from that step: its loss leaves the objective and its
gradients are zeroed, so its weights stop where they went bad, and the others train on (members share no parameter,
so nothing of it reaches them). The step is kept on the device (``first_bad``) and read by the array's callback
every ``log_every`` steps (:class:`ablate.train.members.Members`), which fails that member's run. A member stopped by
a request (hyperband's STOP) is out the same way. Nothing here waits for the device: the members' training losses
are summed on it (``train_sum``, ``train_steps``) and the callback logs their mean over the steps since its last
log, as a solo run's ``train/loss`` is (:class:`ablate.train.system.TransformerSystem`).
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from ablate.components.auxiliary import by_name, collect_aux_losses, weighted_total
from ablate.model import build_model, count_parameters
from ablate.runs.metrics import VAL_ACC, VAL_LOSS, VAL_PPL
from ablate.train.fused import FusedModel
from ablate.train.system import optimizers

RUNNING = -1  # first_bad of a member still training


class FusedSystem(pl.LightningModule):
    """Trains K members of one config; ``configs[k]`` is member k's resolved run config (its seed differs).

    The members are built one by one, each after seeding with its own seed, exactly as its solo run builds it, then
    stacked: member k starts from the weights its solo run starts from.
    """

    def __init__(self, configs: list[dict]):
        super().__init__()
        self.save_hyperparameters()
        self.cfgs = [OmegaConf.create(c) for c in configs]
        self.cfg: DictConfig = self.cfgs[0]
        members = []
        for cfg in self.cfgs:
            pl.seed_everything(cfg.seed, workers=True, verbose=False)
            members.append(build_model(cfg))
        self.n_params = count_parameters(members[0])
        self.model = FusedModel(members)
        del members
        self.k, self.pad_id = self.model.k, self.cfg.data.pad_id
        self.register_buffer("first_bad", torch.full((self.k,), RUNNING, dtype=torch.long))  # (K,) step, or -1
        self.register_buffer("bad_loss", torch.zeros(self.k))  # (K,) the loss at first_bad, what it turned to
        self.register_buffer("out", torch.zeros(self.k, dtype=torch.bool))  # (K,) failed or stopped
        # (K,) train/loss summed over the steps since the last log, and their count; in checkpoints, so that a resumed
        # array logs the values of the uninterrupted one
        self.register_buffer("train_sum", torch.zeros(self.k))
        self.register_buffer("train_steps", torch.zeros((), dtype=torch.long))
        self.val_sums = torch.zeros(3, self.k)  # (nll, correct, tokens) x K over the validation so far
        self.val_metrics: dict[str, torch.Tensor] = {}  # the last validation's per-member metrics, each (K,)
        self.aux_last: dict[str, torch.Tensor] = {}  # the last step's per-member auxiliary losses, each (K,)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """An array checkpoint written before ``bad_loss`` was kept (2026-12-02) resumes: its members that were
        still training had no bad loss to keep (zeros, as a fresh array starts)."""
        checkpoint["state_dict"].setdefault("bad_loss", torch.zeros(self.k))

    def scored_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """labels (K, B, T) with the positions the mask does not let be scored set to padding."""
        scored = self.model.template.mask.scored(labels.size(-1), labels.device)  # (T,)
        return labels.masked_fill(~scored, self.pad_id)

    def _member_losses(self, batch: dict[str, torch.Tensor], smoothing: float, reduction: str):
        """Per member: the cross-entropy (``reduction`` over its tokens), its weighted auxiliary total, its auxiliary
        terms by name, and its logits. Every result carries K first."""
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "position")}
        labels = self.scored_labels(batch["labels"])  # (K, B, T)

        def one(model, member_inputs, member_labels):
            with collect_aux_losses() as aux:
                logits = model(**member_inputs)  # (B, T, V)
            ce = F.cross_entropy(logits.flatten(0, 1), member_labels.flatten(), ignore_index=self.pad_id,
                                 label_smoothing=smoothing, reduction=reduction)
            return ce, ce.new_zeros(()) + weighted_total(aux), by_name(aux), logits

        return (*self.model.vmap(one)(inputs, labels), labels)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        ce, aux_total, aux, _, _ = self._member_losses(batch, self.cfg.train.label_smoothing, "mean")  # (K,) each
        bad = ~torch.isfinite(ce + aux_total) & ~self.out
        # its step as a solo run counts it (callbacks.FiniteLoss): the optimiser steps done, this one included
        self.first_bad.copy_(torch.where(bad, self.global_step + 1, self.first_bad))
        self.bad_loss.copy_(torch.where(bad, (ce + aux_total).detach().to(self.bad_loss.dtype), self.bad_loss))
        self.out.logical_or_(bad)
        keep = ~self.out
        self.train_sum.add_(ce.detach())
        self.train_steps.add_(1)
        self.aux_last = {name: value.detach() for name, value in aux.items()}
        return torch.where(keep, ce + aux_total, 0.0).sum()

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Each member's gradients clipped to ``train.grad_clip`` by their own norm (``clip_grad_norm_``'s rule),
        and those of members that are out zeroed."""
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        keep = (~self.out).to(grads[0].dtype) if grads else None
        clip = self.cfg.train.grad_clip
        scale = keep
        if clip is not None and grads:
            norm = torch.stack([g.flatten(1).float().pow(2).sum(1) for g in grads]).sum(0).sqrt()  # (K,)
            scale = keep * (clip / (norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            factor = scale.view(-1, *([1] * (g.dim() - 1)))
            g.copy_(torch.where(factor > 0, g * factor, 0.0))  # a NaN gradient of a member that is out becomes 0

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        nll, _, _, logits, labels = self._member_losses(batch, 0.0, "sum")  # (K,), (K, B, T, V), (K, B, T)
        real = labels != self.pad_id  # (K, B, T)
        correct = ((logits.argmax(-1) == labels) & real).flatten(1).sum(1)  # (K,)
        self.val_sums = self.val_sums.to(nll.device) + torch.stack([nll, correct.float(), real.flatten(1).sum(1)])

    def on_validation_epoch_start(self) -> None:
        self.val_sums = torch.zeros(3, self.k, device=self.device)

    def on_validation_epoch_end(self) -> None:
        nll, correct, tokens = self.val_sums
        loss = nll / tokens.clamp(min=1)
        self.val_metrics = {VAL_LOSS: loss, VAL_PPL: loss.exp(), VAL_ACC: correct / tokens.clamp(min=1)}
        alive = ~self.out
        # Lightning's own view (checkpoint monitor, progress bar): the mean over members still training.
        mean = (loss * alive).sum() / alive.sum().clamp(min=1)
        self.log(VAL_LOSS, mean, prog_bar=True)

    def configure_optimizers(self):
        return optimizers(self, self.cfg)
