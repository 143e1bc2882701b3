"""Build the base optimizer that applies a replicator's synchronised update.

Kept apart from the replicators so the choice (``auto`` -> each replicator's published default)
and the learning-rate defaults live in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import torch

from netbench.declarations.config import ReplicatorConfig

__all__ = ["build_optimizer", "resolve_lr", "Stepper", "OptimizerChain", "DecoupledAdamW"]


class Stepper(Protocol):
    """All a replicator asks of its optimizer: one ``step()`` applying what is in ``p.grad``."""

    def step(self) -> object: ...


class OptimizerChain:
    """Several optimizers, each over its own parameters, stepped as one (SGD on factored matrices, AdamW on the
    rest)."""

    def __init__(self, optimizers: Sequence[Stepper]) -> None:
        self.optimizers = list(optimizers)

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()


def resolve_lr(config: ReplicatorConfig, default_lr: float) -> float:
    """``lr = 0`` in the config means "the replicator's default"."""
    return config.lr if config.lr > 0 else default_lr


class DecoupledAdamW:
    """AdamW whose moments stay local (DeToNATION): never synchronised, so they differ between nodes.

    Each step first turns this node's own gradient into Adam's direction with its own moments
    (:meth:`precondition`, before the replicator runs); the replicator then synchronises that
    direction, and :meth:`step` applies the synchronised one with decoupled weight decay. Every
    node applies the same update, so parameters agree after every sync while the moments do not.
    """

    def __init__(
        self,
        params: Sequence[torch.nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = 0

    @torch.no_grad()
    def precondition(self, grads: Sequence[torch.Tensor]) -> None:
        """Update the local moments with ``grads`` and overwrite them with the bias-corrected Adam direction."""
        self.steps += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.steps, 1 - b2**self.steps
        for g, m, v in zip(grads, self.exp_avg, self.exp_avg_sq):
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            torch.div(m / c1, (v / c2).sqrt_().add_(self.eps), out=g)

    @torch.no_grad()
    def step(self) -> None:
        """p <- p - lr (synchronised direction + weight_decay p)."""
        for p in self.params:
            if p.grad is not None:
                p.mul_(1 - self.lr * self.weight_decay).add_(p.grad, alpha=-self.lr)


def build_optimizer(
    params: Sequence[torch.nn.Parameter],
    config: ReplicatorConfig,
    default: Literal["sgd", "adamw"],
    default_lr: float,
) -> torch.optim.Optimizer:
    """Plain SGD (DeMo's choice for sign updates), AdamW (DDP and DiLoCo's inner optimizer), or DecoupledAdamW."""
    kind = default if config.optimizer == "auto" else config.optimizer
    lr = resolve_lr(config, default_lr)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, foreach=True)
    if kind == "decoupled_adamw":
        return DecoupledAdamW(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, foreach=True)
