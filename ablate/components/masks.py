"""Decoder self-attention masks. Convention, used everywhere: a boolean mask, True = may attend.

A mask is called with the number of queries and keys and returns a (T_q, T_k) boolean tensor, or
``None`` when every key may be attended to. Queries are the *last* T_q positions of the T_k keys, so
the same mask serves full sequences (T_q == T_k) and incremental decoding (T_q == 1). The key-padding
mask is separate and always applied by the model.

A mask also states what follows from it:

- ``looks_ahead``: some position attends to a later one, so cached keys and values would go stale
  and decoding recomputes the prefix each step.
- :meth:`Mask.scored`: the positions whose label (the next token) no position they can read from
  has seen, through any number of layers. Only those are scored by the loss, ``val/loss``, ``val/acc``
  and perplexity: a position that can read its own label would be scored on copying it.
- ``leaks_labels``: the mask is a deliberate leak (``none``): every position is scored anyway, and
  the report marks the row.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ablate.errors import ConfigError
from ablate.registry import declare_kind, register


class Mask(ABC):
    """A decoder self-attention mask; subclasses implement ``__call__`` and say whether they look ahead."""

    leaks_labels: bool = False

    @property
    @abstractmethod
    def looks_ahead(self) -> bool:
        """Whether some position may attend to a later one."""

    @abstractmethod
    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        """(T_q, T_k) boolean, True = may attend, queries being the last T_q of T_k positions; None = all."""

    def scored(self, length: int, device: torch.device) -> torch.Tensor:
        """(T,) boolean: position t is scored on its label, token t + 1 (True = scored): every position for
        a declared leak (``leaks_labels``), else those of :meth:`unseen_labels`."""
        if self.leaks_labels:
            return torch.ones(length, dtype=torch.bool, device=device)
        return self.unseen_labels(length, device)

    def unseen_labels(self, length: int, device: torch.device) -> torch.Tensor:
        """(T,) boolean: the positions t whose label, token t + 1, no position t reads from has seen.

        Position t's output depends on every position it reaches through the mask's graph in any
        number of steps (layers); its label is unseen when position t + 1 is not among them. The last
        position's label lies beyond the sequence: always unseen. Subclasses may give the same answer
        in closed form.
        """
        allowed = self(length, length, torch.device("cpu"))  # (T, T)
        if allowed is None:
            allowed = torch.ones(length, length, dtype=torch.bool)
        reach = allowed | torch.eye(length, dtype=torch.bool)  # a position always holds its own state
        while True:  # transitive closure by repeated squaring: paths through any number of layers
            longer = (reach.float() @ reach.float()) > 0
            if torch.equal(longer, reach):
                break
            reach = longer
        sees_label = torch.zeros(length, dtype=torch.bool)
        sees_label[:-1] = reach[torch.arange(length - 1), torch.arange(1, length)]
        return (~sees_label).to(device)

    def layers(self, n: int) -> list[Mask]:
        """The mask of each of a decoder's n layers: this one in every layer here. A variant that differs between
        layers (local and global layers) returns its own per layer; its ``__call__`` is then what any position may
        reach through some layer, from which :meth:`scored` and ``looks_ahead`` follow."""
        return [self] * n

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


KIND = declare_kind("mask", key="model.mask", interface=Mask, default="causal",
                    description="decoder self-attention mask (True = may attend); key padding always applies")


def _positions(t_q: int, t_k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(t_k - t_q, t_k, device=device).unsqueeze(1)  # (T_q, 1) query positions
    j = torch.arange(t_k, device=device).unsqueeze(0)  # (1, T_k) key positions
    return i, j


@register("mask", "causal")
class CausalMask(Mask):
    """Position i attends to positions j <= i (Vaswani et al. 2017, section 3.2.3; the paper's)."""

    looks_ahead = False

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        i, j = _positions(t_q, t_k, device)
        return j <= i  # (T_q, T_k)


@register("mask", "none")
class NoMask(Mask):
    """No look-ahead mask: the decoder sees the tokens it predicts (a deliberate label leak; control)."""

    looks_ahead = True
    leaks_labels = True

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        return None


@register("mask", "sliding_window")
class SlidingWindowMask(Mask):
    """Causal, limited to the last `window` positions: i - window < j <= i (Beltagy et al. 2020, Longformer)."""

    looks_ahead = False

    def __init__(self, *, window: int = 64):
        if window <= 0:
            raise ConfigError("model.mask_args.window", window, "a positive integer")
        self.window = window

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        i, j = _positions(t_q, t_k, device)
        return (j <= i) & (j > i - self.window)  # (T_q, T_k)


@register("mask", "prefix_lm")
class PrefixLMMask(Mask):
    """Bidirectional over the first `prefix_len` positions, causal after; only the rest is scored
    (Raffel et al. 2020, T5)."""

    looks_ahead = True

    def __init__(self, *, prefix_len: int = 16):
        if prefix_len < 0:
            raise ConfigError("model.mask_args.prefix_len", prefix_len, "a non-negative integer")
        self.prefix_len = prefix_len

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        i, j = _positions(t_q, t_k, device)
        return (j <= i) | (j < self.prefix_len)  # (T_q, T_k)

    def unseen_labels(self, length: int, device: torch.device) -> torch.Tensor:
        """Positions prefix_len - 1 onwards, whose labels lie after the prefix (no position before them sees those),
        and the last position, whose label lies after the sequence."""
        t = torch.arange(length, device=device)
        return (t >= self.prefix_len - 1) | (t == length - 1)


@register("mask", "local_global")
class LocalGlobalMask(Mask):
    """Sliding-window (local) layers interleaved with causal (global) ones, `local_per_global` local layers to
    each global (Beltagy et al. 2020; Gemma Team 2024)."""

    looks_ahead = False

    def __init__(self, *, window: int = 64, local_per_global: int = 1):
        if window <= 0:
            raise ConfigError("model.mask_args.window", window, "a positive integer")
        if local_per_global < 1:
            raise ConfigError("model.mask_args.local_per_global", local_per_global,
                              "a positive integer: local layers to each global one")
        self.window, self.local_per_global = window, local_per_global
        self._local, self._global = SlidingWindowMask(window=window), CausalMask()

    def __call__(self, t_q: int, t_k: int, device: torch.device) -> torch.Tensor | None:
        """What a position may reach through some layer: the global layers' causal mask."""
        return self._global(t_q, t_k, device)

    def layers(self, n: int) -> list[Mask]:
        """Layer i is global when i + 1 is a multiple of local_per_global + 1 (local, ..., local, global)."""
        return [self._global if (i + 1) % (self.local_per_global + 1) == 0 else self._local for i in range(n)]
