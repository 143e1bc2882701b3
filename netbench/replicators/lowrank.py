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
1-D tensors, scalars and embeddings (:mod:`netbench.declarations.lowrank_plan`) send their
gradient densely in round 1 and are stepped by AdamW (the ``optimizer`` setting). Each round is
one all-reduce of one buffer holding every tensor's part, so a step costs two collectives.

Pipelined (``bucket_mb`` > 0): the tensors are cut into buckets of whole tensors (their round-1
bytes near even); every bucket's round 1 is encoded and started, then as each arrives its QR and
B^T P run and its round 2 starts, then each bucket finishes as its round 2 arrives. Every tensor
goes through the same operations as in the one-bucket step, so the result is the same bit for bit
on two ranks (on more, each all-reduce's ring sums in its own order). `auto` keeps one bucket and
the model predicts the pipelined form only for one-round replicators (these two dependent rounds
are predicted unoverlapped).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.lowrank_plan import LowRankPlan
from netbench.declarations.lowrank_spec import bucket_ranges as _bucket_ranges
from netbench.declarations.lowrank_spec import sends_second as _sends_second
from netbench.replicators.base import WIRE_DTYPES, Replicator, StepTimer
from netbench.replicators.optim import OptimizerChain, Stepper, build_optimizer, resolve_lr

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

    def _setup(self, config: ReplicatorConfig) -> None:
        plan = self.plan
        wire = WIRE_DTYPES[config.grad_dtype]
        first = [s.first_round for s in plan.matrices] + [plan.numels[i] for i in plan.elementwise]
        dev = self.params[0].device
        self.first = torch.empty(plan.first_round_values, dtype=wire, device=dev)
        self.second = torch.empty(plan.second_round_values, dtype=wire, device=dev)
        self._first_at = _offsets(first)
        self._second_at = _offsets([s.n * s.r for s in plan.matrices if s.factored])
        self._factored_before = _offsets([1 if s.factored else 0 for s in plan.matrices])  # R slots before matrix k
        self.ranges = _bucket_ranges(plan, wire.itemsize, config)  # pipeline buckets: ranges of first-round items
        self.comm.open_lanes(sum(1 + _sends_second(plan, r) for r in self.ranges))  # every P and R call of a step
        self.momenta = [torch.zeros(s.m, s.n, device=dev) for s in plan.matrices]
        gen = torch.Generator().manual_seed(config.seed)
        self.right = [torch.randn(s.n, s.r, generator=gen).to(dev) for s in plan.matrices]  # Q, identical on every rank

    @cached_property
    def plan(self) -> LowRankPlan:
        """This replicator's tensors classified (needed by the optimizer, built before ``__init__`` ends)."""
        return LowRankPlan.from_shapes(self.shapes, self.config.rank)

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
        return buffer[at[k] : at[k + 1]]

    def _first_slice(self, a: int, z: int) -> torch.Tensor:
        return self.first[self._first_at[a] : self._first_at[z]]

    def _second_slice(self, a: int, z: int) -> torch.Tensor:
        """The R slots of the factored matrices among items ``a .. z`` (contiguous: R is laid out in matrix order)."""
        nm = len(self.plan.matrices)
        return self.second[
            self._second_at[self._factored_before[min(a, nm)]] : self._second_at[self._factored_before[min(z, nm)]]
        ]

    def _encode(self, a: int, z: int, grads: list[torch.Tensor]) -> None:
        """Round 1 of items ``a .. z``: B = M + G and B Q (or B itself) per matrix, the gradient per element-wise
        tensor.
        """
        matrices = self.plan.matrices
        for k in range(a, z):
            if k < len(matrices):
                s, momentum, q = matrices[k], self.momenta[k], self.right[k]
                momentum.add_(grads[s.index].view(s.m, s.n))  # momentum now holds B = M + G
                sent = momentum @ q if s.factored else momentum
                self._slot(self.first, self._first_at, k).copy_(sent.reshape(-1))
            else:
                self._slot(self.first, self._first_at, k).copy_(
                    grads[self.plan.elementwise[k - len(matrices)]].reshape(-1)
                )

    def _sync(self, timer: StepTimer) -> None:
        grads = self.grads()
        if len(self.ranges) > 1:
            self._sync_pipelined(timer, grads)
            return
        n = len(self.plan.matrices) + len(self.plan.elementwise)
        self._encode(0, n, grads)
        timer.compress()
        self.comm.all_reduce_mean(self.first)
        timer.skip()
        left = self._round_two(0, n)
        timer.compress()
        if self.second.numel():
            self.comm.all_reduce_mean(self.second)
        timer.skip()
        self._finish(0, n, left, grads)
        timer.decode()

    def _sync_pipelined(self, timer: StepTimer, grads: list[torch.Tensor]) -> None:
        """Every bucket's round 1 started, then each bucket's round 2 as its round 1 arrives, then each finish."""
        first_round = []
        for a, z in self.ranges:
            self._encode(a, z, grads)
            timer.compress()
            first_round.append(self.comm.all_reduce_mean_async(self._first_slice(a, z)))
            timer.skip()
        second_round, lefts = [], []
        for (a, z), pending in zip(self.ranges, first_round):
            pending.wait()
            timer.skip()
            lefts.append(self._round_two(a, z))
            timer.compress()
            second_round.append(
                self.comm.all_reduce_mean_async(self._second_slice(a, z)) if _sends_second(self.plan, (a, z)) else None
            )
            timer.skip()
        for (a, z), pending, left in zip(self.ranges, second_round, lefts):
            if pending is not None:
                pending.wait()
                timer.skip()
            self._finish(a, z, left, grads)
            timer.decode()

    def _round_two(self, a: int, z: int) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Orthonormalise the P of every matrix among items ``a .. z``; put each factored one's B^T P in the second
        buffer.

        Returns (P, R) per matrix; R is None where it travels (read back after the all-reduce).
        """
        out: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        matrices = self.plan.matrices
        for k in range(a, min(z, len(matrices))):
            s, momentum, q = matrices[k], self.momenta[k], self.right[k]
            received = self._slot(self.first, self._first_at, k).view(s.m, -1).float()
            if s.factored:
                p = torch.linalg.qr(received).Q
                self._slot(self.second, self._second_at, self._factored_before[k]).copy_((momentum.t() @ p).reshape(-1))
                out.append((p, None))
            else:  # the mean B itself arrived: the same products, locally
                p = torch.linalg.qr(received @ q).Q
                out.append((p, received.t() @ p))
        return out

    def _finish(
        self, a: int, z: int, left: list[tuple[torch.Tensor, torch.Tensor | None]], grads: list[torch.Tensor]
    ) -> None:
        """Error feedback, the new Q and the scaled update of every matrix among items ``a .. z``; the mean gradient
        elsewhere.
        """
        matrices = self.plan.matrices
        for k, (p, r) in zip(range(a, min(z, len(matrices))), left):
            s, momentum, q = matrices[k], self.momenta[k], self.right[k]
            if r is None:
                r = self._slot(self.second, self._second_at, self._factored_before[k]).view(s.n, s.r).float()
            momentum.addmm_(p, r.t(), alpha=-(1.0 - self.config.mu))
            norms = r.norm(dim=0, keepdim=True)
            unit = r / norms.clamp_min(torch.finfo(r.dtype).tiny)  # a zero column stays zero in the update...
            torch.mm(p, unit.t(), out=grads[s.index].view(s.m, s.n)).mul_(math.sqrt(s.m / s.n))
            q.copy_(
                torch.where(norms > 0, unit, q)
            )  # ...but keeps its old Q, or the power iteration could never recover
        for k in range(max(a, len(matrices)), z):
            grads[self.plan.elementwise[k - len(matrices)]].view(-1).copy_(self._slot(self.first, self._first_at, k))
