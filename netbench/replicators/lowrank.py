"""Dion-style low-rank orthonormalised updates (Ahn et al. 2025, algorithm 1): (m + n) r values per matrix.

Per m x n matrix each rank keeps its own momentum M and every rank the same right factor Q
(n x r, drawn from the shared seed). One step, with B = M + G:

    P = mean over ranks of (B Q)        all-reduce 1 (m x r), then orthonormalise P (QR)
    R = mean over ranks of (B^T P)      all-reduce 2 (n x r)
    M = B - (1 - mu) P R^T              error feedback: what was not sent stays local
    Q = R with unit columns             the next step's right factor
    update = sqrt(m / n) P Q^T          applied by plain SGD (lr)

Both products are linear in B, so the averages equal (B_mean Q) and (B_mean^T P): ranks end each
step with identical P, Q and updates while their momenta differ. A matrix whose factors would be
no smaller than itself sends B densely in round 1 and runs the same arithmetic on the mean.
1-D tensors, scalars and embeddings (:mod:`netbench.replicators.lowrank_plan`) send their
gradient densely in round 1 and are stepped by AdamW (the ``optimizer`` setting). Each round is
one all-reduce of one buffer holding every tensor's part, so a step costs two collectives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property

import torch

from netbench.replicators.base import WIRE_DTYPES, PayloadDecl, Replicator, StepTimer
from netbench.replicators.config import ReplicatorConfig
from netbench.replicators.lowrank_plan import LowRankPlan, MatrixSlot
from netbench.replicators.optim import OptimizerChain, Stepper, build_optimizer, resolve_lr
from netbench.shapes import ParamShape

__all__ = ["LowRankReplicator"]


def _offsets(sizes: Sequence[int]) -> list[int]:
    out = [0]
    for size in sizes:
        out.append(out[-1] + size)
    return out


class LowRankReplicator(Replicator):
    """One power iteration per step against a persistent Q; P and R are all that cross the wire."""

    name = "lowrank"
    default_optimizer = "adamw"  # of the element-wise tensors; matrices always take plain SGD steps
    default_lr = 1e-2

    def __init__(self, params: Sequence[torch.nn.Parameter], config: ReplicatorConfig, group=None,
                 names: Sequence[str] | None = None) -> None:
        super().__init__(params, config, group, names)
        plan = self.plan
        wire = WIRE_DTYPES[config.grad_dtype]
        first = [s.first_round for s in plan.matrices] + [plan.numels[i] for i in plan.elementwise]
        dev = self.params[0].device
        self.first = torch.empty(plan.first_round_values, dtype=wire, device=dev)
        self.second = torch.empty(plan.second_round_values, dtype=wire, device=dev)
        self._first_at = _offsets(first)
        self._second_at = _offsets([s.n * s.r for s in plan.matrices if s.factored])
        self.momenta = [torch.zeros(s.m, s.n, device=dev) for s in plan.matrices]
        gen = torch.Generator().manual_seed(config.seed)
        self.right = [torch.randn(s.n, s.r, generator=gen).to(dev) for s in plan.matrices]  # Q, identical on every rank

    @cached_property
    def plan(self) -> LowRankPlan:
        """This replicator's tensors classified (needed by the optimizer, built before ``__init__`` ends)."""
        return LowRankPlan.from_shapes(self.shapes, self.config.rank)

    @classmethod
    def payload(cls, shapes: Sequence[ParamShape], config: ReplicatorConfig, world_size: int) -> PayloadDecl:
        plan = LowRankPlan.from_shapes(shapes, config.rank)
        itemsize = WIRE_DTYPES[config.grad_dtype].itemsize
        second = plan.second_round_values * itemsize
        also = (PayloadDecl("all_reduce", second, label="R"),) if second else ()
        return PayloadDecl("all_reduce", plan.first_round_values * itemsize, label="P", also=also)

    def _build_optimizer(self) -> Stepper:
        """SGD for the orthonormalised matrices (the update is the step), AdamW/SGD for the element-wise rest."""
        lr = resolve_lr(self.config, self.default_lr)
        matrices = [self.params[s.index] for s in self.plan.matrices]
        rest = [self.params[i] for i in self.plan.elementwise]
        optimizers: list[Stepper] = []
        if matrices:
            optimizers.append(torch.optim.SGD(matrices, lr=lr, foreach=True))
        if rest:
            optimizers.append(build_optimizer(rest, self.config, self.default_optimizer, self.default_lr))
        return OptimizerChain(optimizers)

    def _slot(self, buffer: torch.Tensor, at: list[int], k: int) -> torch.Tensor:
        return buffer[at[k]:at[k + 1]]

    def _sync(self, timer: StepTimer) -> None:
        grads = self.grads()
        matrices = self.plan.matrices
        for k, (s, momentum, q) in enumerate(zip(matrices, self.momenta, self.right)):
            momentum.add_(grads[s.index].view(s.m, s.n))  # momentum now holds B = M + G
            sent = momentum @ q if s.factored else momentum
            self._slot(self.first, self._first_at, k).copy_(sent.reshape(-1))
        for j, i in enumerate(self.plan.elementwise):
            self._slot(self.first, self._first_at, len(matrices) + j).copy_(grads[i].reshape(-1))
        timer.compress()
        self.comm.all_reduce_mean(self.first)
        timer.skip()
        left = self._round_two(matrices)
        timer.compress()
        if self.second.numel():
            self.comm.all_reduce_mean(self.second)
        timer.skip()
        self._finish(matrices, left, grads)
        timer.decode()

    def _round_two(self, matrices: Sequence[MatrixSlot]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Orthonormalise every P; put each factored matrix's B^T P in the second buffer.

        Returns (P, R) per matrix; R is None where it travels (read back after the all-reduce).
        """
        out: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        factored = 0
        for k, (s, momentum, q) in enumerate(zip(matrices, self.momenta, self.right)):
            received = self._slot(self.first, self._first_at, k).view(s.m, -1).float()
            if s.factored:
                p = torch.linalg.qr(received).Q
                self._slot(self.second, self._second_at, factored).copy_((momentum.t() @ p).reshape(-1))
                factored += 1
                out.append((p, None))
            else:  # the mean B itself arrived: the same products, locally
                p = torch.linalg.qr(received @ q).Q
                out.append((p, received.t() @ p))
        return out

    def _finish(self, matrices: Sequence[MatrixSlot], left: list[tuple[torch.Tensor, torch.Tensor | None]],
                grads: list[torch.Tensor]) -> None:
        """Error feedback, the new Q and the scaled update of every matrix; the mean gradient elsewhere."""
        factored = 0
        for s, momentum, q, (p, r) in zip(matrices, self.momenta, self.right, left):
            if r is None:
                r = self._slot(self.second, self._second_at, factored).view(s.n, s.r).float()
                factored += 1
            momentum.addmm_(p, r.t(), alpha=-(1.0 - self.config.mu))
            norms = r.norm(dim=0, keepdim=True)
            unit = r / norms.clamp_min(torch.finfo(r.dtype).tiny)  # a zero column stays zero in the update...
            torch.mm(p, unit.t(), out=grads[s.index].view(s.m, s.n)).mul_(math.sqrt(s.m / s.n))
            q.copy_(torch.where(norms > 0, unit, q))  # ...but keeps its old Q, or the power iteration could never recover
        offset = len(matrices)
        for j, i in enumerate(self.plan.elementwise):
            grads[i].view(-1).copy_(self._slot(self.first, self._first_at, offset + j))
