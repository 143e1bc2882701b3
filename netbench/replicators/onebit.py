"""1-bit Adam (Tang et al., arXiv 2102.02888), as DeepSpeed's ``OnebitAdam`` and ``compressed_allreduce`` run it.

For ``freeze_step`` steps every rank runs Adam on the mean gradient (a dense fp32 all-reduce): both moments are
updated, the same on every rank. Then the variance freezes and each rank folds its own gradient into the momentum
``m = b1 m + (1 - b1) g``, which travels compressed (DeepSpeed's ``runtime/comm/nccl.py``):

1. worker: add the worker error to m (padded to n', :func:`~netbench.declarations.onebit_spec.padded`), scale
   ``s_w = ||m|| / sqrt(n')``, error ``m - s_w sign(m)`` (sign 0 counts as +1), pack the signs 8 a byte;
2. all-to-all of the packed signs: rank j receives every worker's chunk j; all-gather of the worker scales;
3. server (each rank for its chunk): the mean of the workers' ``s_w sign``, plus the server error, scaled and
   signed the same way (scale ``||x|| / sqrt(n'/N)``), its error kept, its signs packed;
4. all-gather of the servers' packed signs and of their scales; every rank unpacks the same bytes into the momentum.

Signs cannot say zero, so a position that had no gradient through the warm-up (an embedding row no input used) would
get a scale's worth of momentum over an ``eps`` of variance; DeepSpeed asks the user for a mask of such positions
(``exp_avg_mask``), and this codec takes it from the frozen variance: positions where it is 0 keep no momentum.
The update ``m / (sqrt(v) + eps)`` (no bias correction, as DeepSpeed's) is written to the gradients and the base SGD
applies ``lr`` times it. DeepSpeed compresses each parameter tensor (or each fused group's flat buffer) on its own;
this codec compresses one flat buffer of the whole model, one set of four collectives a step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.onebit_spec import padded
from netbench.replicators.base import Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.optim import Stepper, resolve_lr

__all__ = ["OnebitAdamReplicator", "pack_signs", "unpack_signs"]

BETAS = (0.9, 0.999)  # DeepSpeed OnebitAdam's defaults
EPS = 1e-8
_BIT_WEIGHTS = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8)  # numpy/cupy packbits: big-endian


def pack_signs(values: torch.Tensor) -> torch.Tensor:
    """One bit a value (1: ``values >= 0``), 8 a byte, first value in the high bit; ``values``' length a multiple
    of 8."""
    bits = (values >= 0).view(-1, 8).to(torch.uint8)
    return bits.mul_(_BIT_WEIGHTS.to(values.device)).sum(dim=1, dtype=torch.uint8)


def unpack_signs(packed: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """+1 or -1 per packed bit into ``out`` (8 values a byte)."""
    bits = packed.unsqueeze(-1).bitwise_and(_BIT_WEIGHTS.to(packed.device)).ne_(0)
    return out.copy_(bits.view(out.shape)).mul_(2.0).sub_(1.0)


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
        n, world = self.layout.numel, self.comm.world_size
        self.full = padded(n, world)
        chunk = self.full // world
        self.grad_flat = torch.zeros(n, device=dev)
        self.exp_avg = torch.zeros(n, device=dev)
        self.exp_avg_sq = torch.zeros(n, device=dev)
        self.buffer = torch.zeros(self.full, device=dev)  # the padded momentum, compensated
        self.worker_error = torch.zeros(self.full, device=dev)
        self.server_error = torch.zeros(chunk, device=dev)
        self.received = torch.zeros(world, chunk // 8, dtype=torch.uint8, device=dev)  # workers' signs of my chunk
        self.gathered = torch.zeros(world, chunk // 8, dtype=torch.uint8, device=dev)  # every server's signs
        self.scales = torch.zeros(world, 1, device=dev)
        self.signs = torch.zeros(world, chunk, device=dev)

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
            self._compressed_mean(self.exp_avg, timer)
            self.exp_avg.mul_(self.exp_avg_sq > 0)  # DeepSpeed's exp_avg_mask, from the frozen variance
        torch.div(self.exp_avg, self.exp_avg_sq.sqrt().add_(EPS), out=g)
        self.layout.scatter(g, grads)
        timer.decode()

    def _compressed_mean(self, momentum: torch.Tensor, timer: StepTimer) -> None:
        """Replace ``momentum`` by the compressed mean of every rank's (the same on every rank)."""
        n, world = momentum.numel(), self.comm.world_size
        m = self.buffer
        m[:n].copy_(momentum)
        m[n:].zero_()
        m.add_(self.worker_error)
        self._send(m, self.worker_error, lambda signs: self.comm.all_to_all(signs, self.received), timer)
        unpack_signs(self.received, self.signs)
        server = self.signs.mul_(self.scales / world).sum(dim=0)
        server.add_(self.server_error)
        self._send(server, self.server_error, lambda signs: self.comm.all_gather(signs, self.gathered), timer)
        unpack_signs(self.gathered, self.signs)
        momentum.copy_(self.signs.mul_(self.scales).view(-1)[:n])

    def _send(
        self, values: torch.Tensor, error: torch.Tensor, send_signs: Callable[[torch.Tensor], object], timer: StepTimer
    ) -> None:
        """Compress ``values`` (``error`` keeps what the signs miss; booked as encode), hand its packed signs to
        ``send_signs`` and all-gather its scale into ``self.scales`` (booked as communication)."""
        scale = self._scale_and_error(values, error)
        packed = pack_signs(values)
        timer.compress()
        send_signs(packed)
        self.comm.all_gather(scale, self.scales)
        timer.skip()

    @staticmethod
    def _scale_and_error(values: torch.Tensor, error: torch.Tensor) -> torch.Tensor:
        """DeepSpeed's scale ``||x|| / sqrt(len)`` (a 1-element tensor); ``error`` becomes ``x - scale sign(x)``."""
        scale = (values.norm() / math.sqrt(values.numel())).reshape(1)
        torch.where(values >= 0, values - scale, values + scale, out=error)
        return scale
