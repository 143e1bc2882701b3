"""Streaming DiLoCo (Douillard et al. 2025, arXiv 2501.18512): DiLoCo one fragment of the model at a time.

Every rank runs its inner optimizer on every step. The model's layers are cut into F fragments
(:mod:`netbench.declarations.fragments`); fragment i keeps its own global weights and outer Nesterov SGD. On the step
of the H-step cycle where fragment i's exchange leaves, its pseudo-gradient ``global - local`` is encoded (cast to
grad_dtype, or quantized: :mod:`netbench.replicators.outer_mean`) and its collective started; training goes on for
``fragment_sync_delay`` (tau) steps while it travels. On its sync step the rank waits for it, takes the outer step on
the fragment's global weights and sets the fragment's parameters to ``lerp(global, local, alpha)``
(``fragment_update_alpha``; 0 drops the tau steps of local progress, as torchft's default). Fragments leave one
every ``H / F`` steps (rounded down), so the peak traffic is one fragment's, not the model's.

With one fragment, no delay and no quantization this is DiLoCo step for step (same operations, same order).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.fragments import fragment_members, send_offset, sync_offset
from netbench.replicators.base import Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.outer_mean import OuterMean

__all__ = ["StreamingDiLoCoReplicator", "Fragment"]


class Fragment:
    """One fragment's parameters, global weights, outer optimizer and exchange."""

    def __init__(self, index: int, params: Sequence[torch.nn.Parameter], comm, config: ReplicatorConfig) -> None:
        self.index = index
        self.params = list(params)
        self.layout = FlatLayout(self.params)
        dev = self.params[0].device
        self.start = torch.zeros(self.layout.numel, device=dev)
        self.layout.gather([p.detach() for p in self.params], self.start)
        self.current = torch.zeros(self.layout.numel, device=dev)
        self.averaged = OuterMean(
            comm, self.layout.numel, config.grad_dtype, config.quant_bits, config.quant_block, dev
        )
        momentum = config.outer_momentum
        self.outer = torch.optim.SGD([self.start], lr=config.outer_lr, momentum=momentum, nesterov=momentum > 0)
        h, f, tau = config.sync_every, config.fragments, config.fragment_sync_delay
        self.send_at, self.sync_at = send_offset(index, h, f, tau), sync_offset(index, h, f)
        self.alpha = config.fragment_update_alpha

    def send(self, timer: StepTimer) -> None:
        """Start averaging the pseudo-gradient ``global - local`` (its encode booked as encode)."""
        self.layout.gather([p.detach() for p in self.params], self.current)
        torch.sub(self.start, self.current, out=self.current)
        self.averaged.start(self.current, timer, fragment=self.index)

    def sync(self, timer: StepTimer) -> None:
        """Wait for the average, take the outer step and set the parameters (booked as decode)."""
        self.start.grad = self.averaged.finish(timer)
        self.outer.step()
        if self.alpha:
            local = self.layout.gather([p.detach() for p in self.params], self.current)
            torch.lerp(self.start, local, self.alpha, out=self.current)
            self.layout.scatter(self.current, [p.data for p in self.params])
        else:
            self.layout.scatter(self.start, [p.data for p in self.params])
        timer.decode()


class StreamingDiLoCoReplicator(Replicator):
    """Inner optimizer every step; fragment i's outer exchange leaves tau steps before its own sync step."""

    name = "streaming"
    default_optimizer = "adamw"
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        members = fragment_members([s.name for s in self.shapes], config.fragments, config.fragment_pattern)
        self.fragments = [
            Fragment(i, [self.params[j] for j in group], self.comm, config) for i, group in enumerate(members)
        ]

    def _sync(self, timer: StepTimer) -> None:
        """Nothing to synchronise before the inner step: the local gradients are applied as they are."""
        self.grads()  # a parameter without a gradient gets zeros, as for the other replicators

    def _after_apply(self, timer: StepTimer) -> None:
        at = self.steps_done % self.config.sync_every
        timer.skip()
        for fragment in self.fragments:  # sends first: without a delay a fragment leaves and lands on one step
            if fragment.send_at == at:
                fragment.send(timer)
        for fragment in self.fragments:
            if fragment.sync_at == at:
                fragment.sync(timer)
