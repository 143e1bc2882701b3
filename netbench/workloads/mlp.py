"""A student MLP learning a seeded teacher's classification: a real, cheap loss curve.

The teacher is identical on every rank (seeded by ``seed`` alone), so all ranks share one task;
each rank draws its own inputs (seeded by rank), so their gradients differ. Labels are the
teacher's argmax, so the achievable loss is near zero and the curve falls visibly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from netbench.workloads.base import STREAM_DATA, STREAM_TARGET, Workload, build_shared, make_generator
from netbench.workloads.config import WorkloadConfig


def make_mlp(in_dim: int, hidden: int, layers: int, out_dim: int) -> nn.Sequential:
    """``layers`` hidden ReLU layers of width ``hidden``."""
    mods: list[nn.Module] = []
    width = in_dim
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    mods.append(nn.Linear(width, out_dim))
    return nn.Sequential(*mods)


class MLPWorkload(Workload):
    """Cross-entropy of a student against a fixed random teacher on fresh Gaussian inputs."""

    def __init__(self, cfg: WorkloadConfig, rank: int) -> None:
        self.cfg = cfg
        self.batch_size = cfg.effective_batch_size
        self.model = build_shared(cfg.seed, lambda: make_mlp(cfg.in_dim, cfg.hidden, cfg.mlp_layers, cfg.classes))
        self.teacher = self._make_teacher(cfg)
        self.gen = make_generator(cfg.seed, STREAM_DATA, rank)

    @staticmethod
    def _make_teacher(cfg: WorkloadConfig) -> nn.Module:
        """A one-hidden-layer random network with scaled weights, so its classes are balanced-ish."""
        gen = make_generator(cfg.seed, STREAM_TARGET)
        teacher = make_mlp(cfg.in_dim, cfg.hidden, 1, cfg.classes)
        with torch.no_grad():
            for p in teacher.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) / (p.shape[-1] ** 0.5 if p.dim() > 1 else 1.0))
        teacher.requires_grad_(False)
        return teacher

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh inputs from this rank's stream and the teacher's labels for them."""
        x = torch.randn(self.batch_size, self.cfg.in_dim, generator=self.gen)
        with torch.no_grad():
            y = self.teacher(x).argmax(dim=1)
        return x, y

    def compute_step(self) -> float:
        self.model.zero_grad(set_to_none=False)
        x, y = self.next_batch()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return float(loss.item())
