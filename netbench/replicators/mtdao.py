"""MT-DAO-style multi-timescale local updates: local QH-Adam steps, three states averaged on their own periods.

Every step each rank applies a local adaptive step to its own gradient (nothing is sent)::

    m1 = beta1 m1 + (1 - beta1) g       slow first momentum (beta1 ~ 0.999, half-life ~700 steps)
    v  = beta2 v + (1 - beta2) g^2
    x -= lr ((1 - nu) g + nu m1_hat) / (sqrt(v_hat) + eps)     quasi-hyperbolic mix, bias-corrected

and after the step, on 1-based steps divisible by each period, averages the parameters (every
``params_every`` = K_x), the first momentum (K_1) and the second momentum (K_v), one dense
all-reduce per state in that order (one all-gather of the state quantized, with ``quant_bits``:
:mod:`netbench.replicators.outer_mean`). The parameters travel as their change since the last
parameter average (every rank holds that anchor identically), so a bf16 wire rounds the change,
not the weights. A slow first momentum keeps the shared direction alive across long local runs
(Iacob et al. 2025); ranks must start from identical parameters, as for DiLoCo.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.replicators.base import Replicator, StepTimer
from netbench.replicators.flat import FlatLayout
from netbench.replicators.optim import Stepper, resolve_lr
from netbench.replicators.outer_mean import OuterMean

__all__ = ["MTDAOReplicator", "LocalQHAdam"]

EPS = 1e-8


class LocalQHAdam:
    """QH-Adam over flat first/second momenta, so the replicator can all-reduce them as single buffers."""

    def __init__(
        self, params: Sequence[torch.nn.Parameter], layout: FlatLayout, config: ReplicatorConfig, lr: float
    ) -> None:
        self.params, self.layout, self.config, self.lr = list(params), layout, config, lr
        dev = self.params[0].device
        self.m1 = torch.zeros(layout.numel, device=dev)
        self.v = torch.zeros(layout.numel, device=dev)
        self.grad = torch.zeros(layout.numel, device=dev)
        self.update = torch.zeros(layout.numel, device=dev)
        self.t = 0

    def step(self) -> None:
        c = self.config
        self.t += 1
        g = self.layout.gather([p.grad for p in self.params], self.grad)
        self.m1.mul_(c.beta1).add_(g, alpha=1.0 - c.beta1)
        self.v.mul_(c.beta2).addcmul_(g, g, value=1.0 - c.beta2)
        denom = torch.sqrt(self.v / (1.0 - c.beta2**self.t)).add_(EPS)
        torch.mul(g, 1.0 - c.nu, out=self.update).add_(self.m1, alpha=c.nu / (1.0 - c.beta1**self.t))
        self.update.div_(denom)
        for p, u in zip(self.params, self.layout.views(self.update, self.params)):
            p.data.add_(u, alpha=-self.lr)


class MTDAOReplicator(Replicator):
    """Local QH-Adam every step; parameters, first and second momentum all-reduced every K_x, K_1, K_v steps."""

    name = "mtdao"
    default_optimizer = "adamw"  # unused: the local optimizer is always QH-Adam
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        self.anchor = torch.zeros(self.layout.numel, device=self.params[0].device)
        self.layout.gather([p.detach() for p in self.params], self.anchor)
        self.averaged = OuterMean(
            self.comm,
            self.layout.numel,
            config.grad_dtype,
            config.quant_bits,
            config.quant_block,
            self.params[0].device,
        )

    def _build_optimizer(self) -> Stepper:
        """The local QH-Adam, whose flat momenta are two of the three averaged states."""
        self.layout = FlatLayout(self.params)
        self.local = LocalQHAdam(self.params, self.layout, self.config, resolve_lr(self.config, self.default_lr))
        return self.local

    def _sync(self, timer: StepTimer) -> None:
        """Nothing to synchronise before the local step."""
        self.grads()  # a parameter without a gradient gets zeros, as for the other replicators

    def _after_apply(self, timer: StepTimer) -> None:
        step, c, local = self.steps_done, self.config, self.local
        if step % c.params_every == 0:
            timer.skip()
            current = self.layout.gather([p.detach() for p in self.params], local.grad)  # scratch
            self.anchor.add_(self.averaged.exchange(current.sub_(self.anchor), timer))
            self.layout.scatter(self.anchor, [p.data for p in self.params])
            timer.decode()
        for every, state in ((c.m1_every, local.m1), (c.m2_every, local.v)):
            if step % every == 0:
                timer.skip()
                state.copy_(self.averaged.exchange(state, timer))
                timer.decode()
