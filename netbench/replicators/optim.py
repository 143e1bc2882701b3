"""Build the base optimizer that applies a replicator's synchronised update.

Kept apart from the replicators so the choice (``auto`` -> each replicator's published default)
and the learning-rate defaults live in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import torch

from netbench.replicators.config import ReplicatorConfig

__all__ = ["build_optimizer", "resolve_lr", "Stepper", "OptimizerChain"]


class Stepper(Protocol):
    """All a replicator asks of its optimizer: one ``step()`` applying what is in ``p.grad``."""

    def step(self) -> object: ...


class OptimizerChain:
    """Several optimizers, each over its own parameters, stepped as one (lowrank: SGD + AdamW)."""

    def __init__(self, optimizers: Sequence[Stepper]) -> None:
        self.optimizers = list(optimizers)

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()


def resolve_lr(config: ReplicatorConfig, default_lr: float) -> float:
    """``lr = 0`` in the config means "the replicator's default"."""
    return config.lr if config.lr > 0 else default_lr


def build_optimizer(
    params: Sequence[torch.nn.Parameter],
    config: ReplicatorConfig,
    default: Literal["sgd", "adamw"],
    default_lr: float,
) -> torch.optim.Optimizer:
    """Plain SGD (DeMo's choice for sign updates) or AdamW (DDP and DiLoCo's inner optimizer)."""
    kind = default if config.optimizer == "auto" else config.optimizer
    lr = resolve_lr(config, default_lr)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, foreach=True)
    return torch.optim.AdamW(params, lr=lr, foreach=True)
