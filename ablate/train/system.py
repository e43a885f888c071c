"""The Lightning system: a plain model, its loss, its optimiser and schedule (section 5)."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf
from torch.optim.lr_scheduler import LambdaLR
from torchmetrics.aggregation import MeanMetric

from ablate import registry
from ablate.config.dims import context
from ablate.components.auxiliary import by_name, collect_aux_losses, weighted_total
from ablate.model import build_model, count_parameters
from ablate.runs.metrics import LR, TRAIN_LOSS, VAL_ACC, VAL_LOSS, VAL_PPL
from ablate.train.loss import projected_loss, supports_projected_loss
from ablate.train.optimizer import adam


class TransformerSystem(pl.LightningModule):
    """Trains the model a run config describes, with label-smoothed cross-entropy that ignores padding.

    ``train/loss`` is the training objective (label-smoothed); ``val/loss`` is the
    plain per-token negative log-likelihood, so variants with different eps_ls
    compare fairly, and ``val/ppl`` = exp(val/loss) (per word-piece, as in Table 3).

    Every one of them counts only the positions the decoder mask lets be scored
    (:meth:`ablate.components.masks.Mask.scored`): a position that can read its own label is
    never scored on it (a prefix-LM's prefix), unless the mask is a declared leak.

    A component's auxiliary losses (:mod:`ablate.components.auxiliary`) join the training objective with their
    weights and are logged apart (``train/aux/<name>``, ``val/aux/<name>``), never in ``val/loss``.

    ``train/loss`` is the mean over the steps since it was last logged, summed on the loss's device and logged every
    ``train.log_every`` steps (and at the last), not with ``prog_bar=True``: Lightning converts a step's progress-bar
    metrics to Python numbers whenever it gathers its metrics (three times a step), which stalls the loop on a GPU.
    The bar shows it as logged (:class:`ablate.train.logs.LoggedLossBar`).
    """

    def __init__(self, config: dict):
        super().__init__()
        self.save_hyperparameters()  # the whole resolved config travels in every checkpoint
        self.cfg: DictConfig = OmegaConf.create(config)
        self.model = build_model(self.cfg)
        self.pad_id = self.cfg.data.pad_id
        self.n_params = count_parameters(self.model)
        self.val_nll = MeanMetric()
        self.val_acc = MeanMetric()
        self._loss_sum: torch.Tensor | float = 0.0  # train/loss over the steps since it was last logged, on its device
        self._loss_steps = 0
        self._logged_at = -1  # the global step train/loss was last logged at
        self._scored: dict[tuple[int, str], torch.Tensor] = {}
        # Training projects only the scored real tokens, chunked, when the head is one matrix product
        # (ablate.train.loss); validation keeps the full logits (its per-token loss and accuracy as they were).
        self.projected = hasattr(self.model, "hidden") and supports_projected_loss(self.model.generator)
        # trainer.compile: the training forward through torch.compile; validation and decoding stay eager (their
        # shapes change step by step). A plain attribute, not a submodule: the state dict keeps its keys.
        target = self.model.hidden if self.projected else self.model
        compiled = torch.compile(target) if self.cfg.trainer.get("compile", False) else None
        self.__dict__["_compiled"] = compiled

    def scored_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """labels (B, T) with the positions the mask does not let be scored set to padding (ignored)."""
        key = (labels.size(1), str(labels.device))
        if key not in self._scored:
            self._scored[key] = self.model.mask.scored(labels.size(1), labels.device)  # (T,)
        return labels.masked_fill(~self._scored[key], self.pad_id)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits (B, T, V) for a batch dict (its keys other than ``labels`` are the model's arguments)."""
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        if self._compiled is not None and self.training:
            out = self._compiled(**inputs)
            return self.model.generator(out) if self.projected else out
        return self.model(**inputs)

    def hidden(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The decoder's output (B, T, d_model) for a batch dict: :meth:`forward` before the generator."""
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        return (self._compiled if self._compiled is not None and self.training else self.model.hidden)(**inputs)

    def _token_losses(self, batch: dict[str, torch.Tensor], smoothing: float) -> tuple[torch.Tensor, ...]:
        """The mean loss over scored real tokens, the logits (B, T, V), the scored labels (B, T) and the auxiliary
        losses the model's components added."""
        with collect_aux_losses() as aux:
            logits = self(batch)  # (B, T, V)
        labels = self.scored_labels(batch["labels"])  # (B, T)
        loss = F.cross_entropy(
            logits.flatten(0, 1), labels.flatten(), ignore_index=self.pad_id, label_smoothing=smoothing
        )
        return loss, logits, labels, aux

    def _projected_loss(self, batch: dict[str, torch.Tensor], smoothing: float) -> tuple[torch.Tensor, list]:
        """:meth:`_token_losses`' loss and auxiliary losses without the full logits (:mod:`ablate.train.loss`)."""
        with collect_aux_losses() as aux:
            hidden = self.hidden(batch)  # (B, T, d_model)
        labels = self.scored_labels(batch["labels"])  # (B, T)
        return projected_loss(hidden, self.model.generator, labels, self.pad_id, smoothing), aux

    def training_loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, list]:
        """The training objective's cross-entropy (label-smoothed) and the auxiliary losses, by the head's path."""
        smoothing = self.cfg.train.label_smoothing
        if self.projected:
            return self._projected_loss(batch, smoothing)
        loss, _, _, aux = self._token_losses(batch, smoothing)
        return loss, aux

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, aux = self.training_loss(batch)
        self._log_loss(loss.detach())
        for name, value in by_name(aux).items():
            self.log(f"train/aux/{name}", value.detach())
        return loss + weighted_total(aux)

    def _log_loss(self, loss: torch.Tensor) -> None:
        """Adds a step's loss to the window and logs the window's mean at the steps Lightning writes logs at (every
        ``log_every`` optimiser steps, and the last); never reads it back to the host. The micro-batches of one
        optimiser step (``accumulate_grad_batches``) join the same window; the last of them is the one written."""
        step = self.global_step  # optimiser steps done before this one
        if self._logged_at not in (-1, step):  # the first micro-batch after a logged step starts a new window
            self._loss_sum, self._loss_steps, self._logged_at = 0.0, 0, -1
        self._loss_sum = self._loss_sum + loss
        self._loss_steps += 1
        trainer = self._trainer  # None outside a Trainer (a test calling training_step): nothing to log to
        if trainer is not None and ((step + 1) % trainer.log_every_n_steps == 0 or step + 1 >= trainer.max_steps > 0):
            self.log(TRAIN_LOSS, self._loss_sum / self._loss_steps)
            self._logged_at = step

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["train_loss_window"] = {"sum": self._loss_sum, "steps": self._loss_steps,
                                           "logged_at": self._logged_at}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """A resumed run logs the same ``train/loss`` means as the run it continues (when ``val_every`` is not a
        multiple of ``log_every``, a checkpoint falls inside a window)."""
        window = checkpoint.get("train_loss_window", {"sum": 0.0, "steps": 0, "logged_at": -1})
        self._loss_sum, self._loss_steps, self._logged_at = window["sum"], window["steps"], window["logged_at"]

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        nll, logits, labels, aux = self._token_losses(batch, 0.0)
        for name, value in by_name(aux).items():
            self.log(f"val/aux/{name}", value, on_step=False, on_epoch=True)
        real = labels != self.pad_id  # (B, T): real tokens at scored positions
        n = real.sum()
        correct = ((logits.argmax(-1) == labels) & real).sum()
        self.val_nll.update(nll, weight=n)
        self.val_acc.update(correct / n.clamp(min=1), weight=n)

    def on_validation_epoch_end(self) -> None:
        nll = self.val_nll.compute()
        self.log_dict({VAL_LOSS: nll, VAL_PPL: nll.exp(), VAL_ACC: self.val_acc.compute()}, prog_bar=True)
        self.val_nll.reset()
        self.val_acc.reset()

    def configure_optimizers(self):
        return optimizers(self, self.cfg)


def optimizers(module: pl.LightningModule, cfg: DictConfig) -> dict:
    """What ``configure_optimizers`` returns for a run of ``cfg`` (solo, or a seed array's stacked members): Adam
    (:func:`ablate.train.optimizer.adam`) and the config's schedule, stepped every optimiser step."""
    trainer = module._trainer  # None outside a Trainer (benchmarks, notebooks)
    mixed = trainer is not None and "mixed" in str(trainer.precision)
    optimizer = adam(module.parameters(), cfg.train, mixed_precision=mixed)
    scheduler = LambdaLR(optimizer, build_schedule(cfg))  # base lr 1.0: the schedule gives the absolute lr
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step", "name": LR}}


def build_schedule(cfg: DictConfig) -> Callable[[int], float]:
    """The config's learning-rate schedule (``train.schedule`` with its ``schedule_args``): step -> absolute lr.

    Raises:
        ConfigError: the schedule refuses its arguments (checked before a run writes anything, by preflight).
    """
    t = cfg.train
    return registry.create("schedule", t.schedule, context(cfg), OmegaConf.to_container(t.schedule_args))
