"""DiLoCo: H local optimizer steps, then one all-reduce of the pseudo-gradient and an outer Nesterov step."""

from __future__ import annotations

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.replicators.base import Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.outer_mean import OuterMean

__all__ = ["DiLoCoReplicator"]


class DiLoCoReplicator(Replicator):
    """Inner optimizer (AdamW by default) every step on local gradients; every ``sync_every`` steps:

    ``delta = start - params`` (the pseudo-gradient) averaged with one all-reduce (one all-gather of it
    quantized, with ``quant_bits``: :mod:`netbench.replicators.outer_mean`), an outer SGD
    step with Nesterov momentum (lr ``outer_lr``, momentum ``outer_momentum``) on the start
    weights, and every rank's parameters reset to the new start weights. Ranks therefore agree
    after each synchronising step and drift apart in between; nothing crosses the wire on the
    other steps. The start weights are taken from the parameters at construction, so ranks must
    begin from identical parameters (seed them alike, or broadcast before building).
    """

    name = "diloco"
    default_optimizer = "adamw"
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        self.layout = FlatLayout(self.params)
        dev = self.params[0].device
        self.start = torch.zeros(self.layout.numel, device=dev)
        self.layout.gather([p.detach() for p in self.params], self.start)
        self.current = torch.zeros(self.layout.numel, device=dev)
        self.averaged = OuterMean(
            self.comm, self.layout.numel, config.grad_dtype, config.quant_bits, config.quant_block, dev
        )
        momentum = config.outer_momentum
        self.outer = torch.optim.SGD([self.start], lr=config.outer_lr, momentum=momentum, nesterov=momentum > 0)

    def syncs_on(self, step: int) -> bool:
        """Whether 1-based ``step`` ends with an outer synchronisation."""
        return step % self.config.sync_every == 0

    def _sync(self, timer: StepTimer) -> None:
        """Nothing to synchronise before the inner step: the local gradients are applied as they are."""
        self.grads()  # a parameter without a gradient gets zeros, as for the other replicators

    def _outgoing(self, delta: torch.Tensor) -> torch.Tensor:
        """What this rank sends of its pseudo-gradient ``delta``: all of it (MuLoCo sends what its error feedback
        makes of it)."""
        return delta

    def _after_apply(self, timer: StepTimer) -> None:
        if not self.syncs_on(self.steps_done):
            return
        timer.skip()
        self.layout.gather([p.detach() for p in self.params], self.current)
        torch.sub(self.start, self.current, out=self.current)
        self.start.grad = self.averaged.exchange(self._outgoing(self.current), timer)
        self.outer.step()
        self.layout.scatter(self.start, [p.data for p in self.params])
        timer.decode()
