"""The one interface the worker sees: a model, its parameters, and one local compute step.

The replicator, not the workload, owns the optimizer: ``compute_step`` only leaves gradients in
``p.grad``; the replicator then synchronises them and updates the parameters.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn

from netbench.shapes import ParamShape

T = TypeVar("T")

# Stream tags keep per-purpose random streams independent of each other.
STREAM_INIT, STREAM_DATA, STREAM_TARGET = 1, 2, 3


def make_generator(seed: int, stream: int, rank: int | None = None) -> torch.Generator:
    """A torch generator for one purpose; ``rank=None`` gives a stream shared by all ranks."""
    gen = torch.Generator()
    mix = (seed * 1_000_003 + stream) * 1_000_033 + (0 if rank is None else rank + 1)
    gen.manual_seed(mix % (2**63 - 1))
    return gen


class Workload(ABC):
    """A model plus the data (or stand-in) that produces its gradients on one rank."""

    model: nn.Module

    def parameters(self) -> list[nn.Parameter]:
        """Trainable parameters in a stable order (the order replicators see them in)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def param_shapes(self) -> list[ParamShape]:
        """(name, shape) of every trainable parameter, as the payload formulas consume them."""
        return [ParamShape(n, tuple(p.shape)) for n, p in self.model.named_parameters() if p.requires_grad]

    def num_params(self) -> int:
        """Scalar parameter count."""
        return sum(p.numel() for p in self.parameters())

    @abstractmethod
    def compute_step(self) -> float:
        """Zero the gradients, run forward and backward on this rank's next batch, return the loss."""


def build_shared(seed: int, factory: Callable[[], T]) -> T:
    """Call ``factory`` under a rank-independent seed so every replica's initial weights are identical.

    The global RNG is forked, so the caller's random state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed * 1_000_003 + STREAM_INIT)
        return factory()
