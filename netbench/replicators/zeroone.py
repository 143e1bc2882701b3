"""0/1 Adam (Lu et al., arXiv 2202.06009), as DeepSpeed's ``ZeroOneAdam`` runs it; which step does what is the
declaration's (:func:`~netbench.declarations.zeroone_spec.step_kind`).

- ``dense``: the gradients all-reduced (DeepSpeed's engine all-reduce), both moments updated;
- ``compressed``: each rank's gradient through the compressed all-reduce
  (:class:`~netbench.replicators.signbits.CompressedAllReduce`, 1-bit Adam's), the momentum updated with the result;
- ``local``: the momentum updated with the rank's own gradient, the step's update ``lr m / (sqrt(v) + eps)``
  accumulated (DeepSpeed's ``momentum_accumulator``) and the learning rates summed;
- ``sync``: a local step, then the accumulation, times ``sqrt(v) + eps``, through the compressed all-reduce: the
  weights become those of the last sync plus the mean accumulation over ``sqrt(v) + eps``, and the momentum the mean
  accumulation over minus the summed learning rates.

The errors of the compressed all-reduce are zeroed when the local phase begins (DeepSpeed's
``reinitial_error_buffer``: they held gradients, they will hold accumulated updates). As in 1-bit Adam the mask of
positions the signs must leave at 0 (``exp_avg_mask``) is where the variance is 0. DeepSpeed undoes the local steps
by subtracting the accumulation from the weights; this codec keeps the weights of the last sync and writes them plus
the synced update, so every rank ends a sync with the same weights to the bit. One flat buffer of the whole model is
compressed, one set of four collectives a communicating step.
"""

from __future__ import annotations

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.zeroone_spec import step_kind
from netbench.replicators.base import StepTimer
from netbench.replicators.onebit import BETAS, EPS, OnebitAdamReplicator

__all__ = ["ZeroOneAdamReplicator"]


class ZeroOneAdamReplicator(OnebitAdamReplicator):
    """Adam whose variance updates thin out, then local steps whose accumulated update syncs as sign bits: 1-bit
    Adam's state, optimizer and compressed all-reduce (ZeroOneAdam's betas and eps are OnebitAdam's), with the local
    phase's accumulation beside them."""

    name = "zeroone"

    def _setup(self, config: ReplicatorConfig) -> None:
        super()._setup(config)
        dev, n = self.params[0].device, self.layout.numel
        self.accumulated = torch.zeros(n, device=dev)  # DeepSpeed's momentum_accumulator: minus the local updates
        self.synced = torch.zeros(n, device=dev)  # the weights of the last sync
        self.lrs = 0.0  # the learning rates of the local steps since the last sync
        self.local = False  # in the local phase
        self.write_synced = False  # the step ends with the synced weights

    def _sync(self, timer: StepTimer) -> None:
        grads = self.grads()
        g = self.layout.gather(grads, self.grad_flat)
        b1, b2 = BETAS
        kind = step_kind(self.config, self.steps_done)
        if kind == "dense":
            timer.compress()
            self.comm.all_reduce_mean(g)
            timer.skip()
            self.exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
        elif kind == "compressed":
            self.compressed.mean(g, timer)
            g.mul_(self.exp_avg_sq > 0)  # exp_avg_mask, from the variance
        elif not self.local:  # the first local step: the errors held gradients, they will hold updates
            self.local = True
            self.compressed.reset_errors()
            self.layout.gather([p.detach() for p in self.params], self.synced)
        self.exp_avg.mul_(b1).add_(g, alpha=1 - b1)
        denom = self.exp_avg_sq.sqrt().add_(EPS)
        torch.div(self.exp_avg, denom, out=g)  # the step's update direction, which SGD applies times lr
        if self.local:
            lr = float(self.optimizer.param_groups[0]["lr"])
            self.lrs += lr
            self.accumulated.add_(g, alpha=-lr)
            if kind == "sync":
                self._sync_accumulated(denom, timer)
        self.layout.scatter(g, grads)
        timer.decode()

    def _sync_accumulated(self, denom: torch.Tensor, timer: StepTimer) -> None:
        """The accumulated update's compressed mean: the synced weights and momentum (written after SGD's step)."""
        acc = self.accumulated.mul_(denom)
        self.compressed.mean(acc, timer)
        acc.mul_(self.exp_avg_sq > 0)
        torch.div(acc, -self.lrs, out=self.exp_avg)
        self.synced.add_(acc.div_(denom))
        acc.zero_()
        self.lrs = 0.0
        self.write_synced = True

    def _after_apply(self, timer: StepTimer) -> None:
        """On a sync step, the weights become the synced ones (SGD applied the local update DeepSpeed undoes)."""
        if self.write_synced:
            timer.skip()
            self.layout.scatter(self.synced, [p.detach() for p in self.params])
            self.write_synced = False
            timer.decode()
