"""Shared machinery of the replicators that all-reduce a subset of positions, chosen alike on every rank.

They follow DeToNATION: each rank keeps a decoupled momentum ``m = beta m + g`` (``beta``: ``momentum_decay``);
the selected positions of ``m`` are sent (and removed from ``m``, exactly as they travel), averaged with one
all-reduce, and become the update (signed by default); every other position of the update is
zero. The unsent part is therefore not lost: it stays in the local momentum (error feedback with
decay ``beta``) until its position is selected. Because every rank derives the same positions
from shared state (the step number, the seed), no indices cross the wire.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import torch

from netbench.declarations.buckets import bucket_bytes, slot_ranges
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.pipeline_policy import behind_for
from netbench.replicators.base import WIRE_DTYPES, Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.pipeline import run_pipeline
from netbench.shapes import ParamShape

__all__ = ["SubsetReplicator"]

Selection = torch.Tensor | slice


class SubsetReplicator(Replicator):
    """Momentum, send buffer and update for one flat vector of all parameters."""

    default_optimizer = "sgd"
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        self.layout = FlatLayout(self.params)
        device = self.params[0].device
        self.momentum = torch.zeros(self.layout.numel, device=device)
        self.update = torch.zeros(self.layout.numel, device=device)
        slots = self.slots(self.shapes, config)
        self.send = torch.zeros(slots, dtype=WIRE_DTYPES[config.value_dtype], device=device)
        self.ranges = slot_ranges(slots, self.send.element_size(), bucket_bytes(config.bucket_mb))  # pipeline buckets
        self.comm.open_lanes(len(self.ranges))
        self._momentum_views = self.layout.views(self.momentum, self.params)

    @classmethod
    @abstractmethod
    def slots(cls, shapes: Sequence[ParamShape], config: ReplicatorConfig) -> int:
        """Values in the all-reduce buffer (the same on every step), as its declaration counts them."""

    @abstractmethod
    def selection(self, step: int) -> Selection:
        """Flat positions sent on 0-based ``step``: an int64 index tensor or a strided slice."""

    def positions(self, step: int) -> torch.Tensor:
        """The flat positions of ``selection(step)`` as an index tensor (for tests and tools)."""
        sel = self.selection(step)
        if isinstance(sel, slice):
            return torch.arange(self.layout.numel, device=self.momentum.device)[sel]
        return sel

    def _sync(self, timer: StepTimer) -> None:
        if len(self.ranges) > 1:
            self._sync_pipelined(timer)
            return
        beta = self.config.momentum_decay
        for m, g in zip(self._momentum_views, self.grads()):
            m.mul_(beta).add_(g)
        sel = self.selection(self.steps_done - 1)
        picked = self.momentum[sel]  # a view for slices, a copy for index tensors
        count = picked.numel()
        self.send[:count].copy_(picked)
        self.send[count:].zero_()  # padding slots (striding) carry zeros
        sent = self.send[:count].to(torch.float32)
        if isinstance(sel, slice):
            self.momentum[sel].sub_(sent)
        else:
            self.momentum.index_add_(0, sel, sent, alpha=-1.0)
        timer.compress()
        self.comm.all_reduce_mean(self.send)
        timer.skip()
        averaged = self.send[:count].to(torch.float32)
        if self.config.sign:
            averaged.sign_()
        self.update.zero_()
        if isinstance(sel, slice):
            self.update[sel].copy_(averaged)
        else:
            self.update.index_copy_(0, sel, averaged)
        self.layout.scatter(self.update, self.grads())
        timer.decode()

    def _sync_pipelined(self, timer: StepTimer) -> None:
        """The same step with the send buffer cut into slot ranges that overlap encode, wire and decode.

        Slot ``j`` carries the ``j``-th selected position in both forms, so every position is
        sent, subtracted and updated exactly as in the one-bucket step.
        """
        beta = self.config.momentum_decay
        for m, g in zip(self._momentum_views, self.grads()):
            m.mul_(beta).add_(g)
        sel = self.selection(self.steps_done - 1)
        count = self.momentum[sel].numel() if isinstance(sel, slice) else sel.numel()
        self.update.zero_()

        def part(b: int) -> tuple[Selection, int, int]:
            """The positions of bucket ``b``'s slots that exist (striding's last slot may be a pad)."""
            a, z = self.ranges[b]
            real = max(0, min(z, count) - a)
            if isinstance(sel, slice):
                return slice(sel.start + a * sel.step, sel.start + (a + real) * sel.step, sel.step), a, real
            return sel[a : a + real], a, real

        def encode(b: int) -> None:
            where, a, real = part(b)
            z = self.ranges[b][1]
            self.send[a : a + real].copy_(self.momentum[where])
            self.send[a + real : z].zero_()
            sent = self.send[a : a + real].to(torch.float32)
            if isinstance(where, slice):
                self.momentum[where].sub_(sent)
            else:
                self.momentum.index_add_(0, where, sent, alpha=-1.0)

        def start(b: int):
            a, z = self.ranges[b]
            return self.comm.all_reduce_mean_async(self.send[a:z])

        def decode(b: int) -> None:
            where, a, real = part(b)
            averaged = self.send[a : a + real].to(torch.float32)
            if self.config.sign:
                averaged.sign_()
            if isinstance(where, slice):
                self.update[where].copy_(averaged)
            else:
                self.update.index_copy_(0, where, averaged)

        run_pipeline(len(self.ranges), encode, start, decode, timer, behind_for(self.comm.concurrent(len(self.ranges))))
        self.layout.scatter(self.update, self.grads())
        timer.decode()
