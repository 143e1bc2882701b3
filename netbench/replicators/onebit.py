"""1-bit Adam (Tang et al., arXiv 2102.02888), as DeepSpeed's ``OnebitAdam`` and ``compressed_allreduce`` run it.

For ``freeze_step`` steps every rank runs Adam on the mean gradient (a dense fp32 all-reduce): both moments are
updated, the same on every rank. Then the variance freezes and each rank folds its own gradient into the momentum
``m = b1 m + (1 - b1) g``, which travels through DeepSpeed's compressed all-reduce
(:class:`~netbench.replicators.signbits.CompressedAllReduce`: an all-to-all of error-fed sign bits, the servers'
reduced chunks all-gathered back, each with its scale).

Signs cannot say zero, so a position that had no gradient through the warm-up (an embedding row no input used) would
get a scale's worth of momentum over an ``eps`` of variance; DeepSpeed asks the user for a mask of such positions
(``exp_avg_mask``), and this codec takes it from the frozen variance: positions where it is 0 keep no momentum.
The update ``m / (sqrt(v) + eps)`` (no bias correction, as DeepSpeed's) is written to the gradients and the base SGD
applies ``lr`` times it. DeepSpeed compresses each parameter tensor (or each fused group's flat buffer) on its own;
this codec compresses one flat buffer of the whole model, one set of four collectives a step.
"""

from __future__ import annotations

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.replicators.base import Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.optim import Stepper, resolve_lr
from netbench.replicators.signbits import CompressedAllReduce

__all__ = ["OnebitAdamReplicator"]

BETAS = (0.9, 0.999)  # DeepSpeed OnebitAdam's defaults
EPS = 1e-8


class OnebitAdamReplicator(Replicator):
    """Dense Adam for ``freeze_step`` steps, then the momentum through DeepSpeed's compressed all-reduce."""

    name = "onebit"
    default_lr = 1e-3

    def _build_optimizer(self) -> Stepper:
        """Plain SGD: the Adam direction is computed here, with the synchronised momentum."""
        return torch.optim.SGD(self.params, lr=resolve_lr(self.config, self.default_lr), foreach=True)

    def _setup(self, config: ReplicatorConfig) -> None:
        dev = self.params[0].device
        self.layout = FlatLayout(self.params)
        n = self.layout.numel
        self.grad_flat = torch.zeros(n, device=dev)
        self.exp_avg = torch.zeros(n, device=dev)
        self.exp_avg_sq = torch.zeros(n, device=dev)
        self.compressed = CompressedAllReduce(self.comm, n, dev)

    def _sync(self, timer: StepTimer) -> None:
        grads = self.grads()
        g = self.layout.gather(grads, self.grad_flat)
        b1, b2 = BETAS
        if self.steps_done <= self.config.freeze_step:
            timer.compress()
            self.comm.all_reduce_mean(g)
            timer.skip()
            self.exp_avg.mul_(b1).add_(g, alpha=1 - b1)
            self.exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
        else:
            self.exp_avg.mul_(b1).add_(g, alpha=1 - b1)
            self.compressed.mean(self.exp_avg, timer)
            self.exp_avg.mul_(self.exp_avg_sq > 0)  # DeepSpeed's exp_avg_mask, from the frozen variance
        torch.div(self.exp_avg, self.exp_avg_sq.sqrt().add_(EPS), out=g)
        self.layout.scatter(g, grads)
        timer.decode()
