"""The replicator contract: what a step reports, what it declares, and the shared step skeleton.

A replicator turns every rank's local gradients into one synchronised optimizer step. The
interface is deliberately tiny (``step()`` plus a payload formula per class) because the
workers, the orchestrator and the analytic model all code against it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from netbench.replicators.comm import GroupComm
from netbench.replicators.config import ReplicatorConfig
from netbench.replicators.optim import build_optimizer
from netbench.shapes import ParamShape

__all__ = ["PayloadDecl", "StepStats", "Replicator", "StepTimer", "WIRE_DTYPES", "param_shapes"]

Collective = Literal["all_reduce", "all_gather", "none"]

WIRE_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class PayloadDecl:
    """What one node hands to collectives, derived from shapes and settings alone.

    The analytic model and the workers both read this, so predicted and measured bytes come
    from the same formula (and a test checks the formula against the real tensors).
    """

    collective: Collective
    bytes_per_step: int  # on a communicating step: all_gather -> own contribution, all_reduce -> buffer size
    period: int = 1  # communicates every `period` steps (diloco: sync_every)
    collectives_per_step: int = 1


@dataclass
class StepStats:
    """Where one step's wall time went, and what it put on the wire."""

    compress_s: float
    comm_s: float
    decode_s: float
    apply_s: float
    payload_bytes: int
    collectives: int


class StepTimer:
    """Splits a step into phases with ``perf_counter`` so every replicator reports alike."""

    def __init__(self) -> None:
        self.compress_s = self.decode_s = self.apply_s = 0.0
        self._t = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._t = now - self._t, now
        return elapsed

    def stats(self, comm: GroupComm) -> StepStats:
        comm_s, payload, collectives = comm.take()
        return StepStats(self.compress_s, comm_s, self.decode_s, self.apply_s, payload, collectives)


def param_shapes(params: Sequence[torch.Tensor]) -> list[ParamShape]:
    """Shapes of live parameters, in order, as the payload formulas consume them."""
    return [ParamShape(f"p{i}", tuple(p.shape)) for i, p in enumerate(params)]


class Replicator(ABC):
    """One full optimizer step per call: read ``p.grad``, synchronise, apply the base optimizer.

    Subclasses implement :meth:`_sync` (everything up to and including writing the synchronised
    update into ``p.grad``) and :meth:`payload` (their wire formula). The base owns the group,
    the byte accounting and the optimizer so timings mean the same thing for every replicator.
    """

    name: ClassVar[str]
    default_optimizer: ClassVar[Literal["sgd", "adamw"]] = "sgd"
    default_lr: ClassVar[float] = 1e-3

    def __init__(self, params: Sequence[torch.nn.Parameter], config: ReplicatorConfig, group=None) -> None:
        if config.name != self.name:
            raise ValueError(f"{type(self).__name__} needs config.name={self.name!r}, got {config.name!r}")
        self.params: list[torch.nn.Parameter] = list(params)
        if not self.params:
            raise ValueError("a replicator needs at least one parameter")
        self.config = config
        self.comm = GroupComm(group)
        self.steps_done = 0
        self.optimizer = build_optimizer(self.params, config, self.default_optimizer, self.default_lr)

    @classmethod
    @abstractmethod
    def payload(cls, shapes: Sequence[ParamShape], config: ReplicatorConfig, world_size: int) -> PayloadDecl:
        """Bytes this node hands to collectives per communicating step (pure: shapes and settings only)."""

    @abstractmethod
    def _sync(self, timer: StepTimer) -> None:
        """Synchronise the gradients and leave the update to apply in every ``p.grad``.

        Implementations add to ``timer.compress_s`` / ``timer.decode_s`` (use ``timer.lap()``
        around the collective so its wait is excluded); the collective time itself is measured
        by :class:`GroupComm`.
        """

    def step(self) -> StepStats:
        """Synchronise and apply one optimizer step; returns where the time and bytes went."""
        self.steps_done += 1
        timer = StepTimer()
        with torch.no_grad():
            self._sync(timer)
            timer.lap()
            self.optimizer.step()
            timer.apply_s += timer.lap()
            self._after_apply(timer)
        return timer.stats(self.comm)

    def _after_apply(self, timer: StepTimer) -> None:
        """Hook for work that must follow the base optimizer (DiLoCo's outer step)."""

    def grads(self) -> list[torch.Tensor]:
        """Each parameter's gradient; a missing one counts as zeros so every rank sends alike."""
        out = []
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            out.append(p.grad)
        return out
