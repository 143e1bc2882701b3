"""``build_workload``: the one entry point the worker (and tests) use to get a workload."""

from __future__ import annotations

from netbench.workloads.base import Workload
from netbench.workloads.config import WorkloadConfig


def build_workload(cfg: WorkloadConfig, rank: int, world_size: int) -> Workload:
    """Build ``cfg.kind`` for ``rank`` of ``world_size``: identical initial weights on every rank,
    data (or synthetic gradients) seeded by rank so gradients differ between ranks."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world size {world_size}")
    if cfg.kind == "transformer":
        from netbench.workloads.transformer import TransformerWorkload  # late: only the chosen workload's model

        return TransformerWorkload(cfg, rank)
    if cfg.kind == "mlp":
        from netbench.workloads.mlp import MLPWorkload  # late: only the chosen workload's model

        return MLPWorkload(cfg, rank)
    if cfg.kind == "shapes":
        from netbench.workloads.shapes import ShapesWorkload  # late: only the chosen workload's model

        return ShapesWorkload(cfg, rank)
    if cfg.kind == "python":
        from netbench.workloads.python import PythonWorkload  # late: only the chosen workload's model

        return PythonWorkload(cfg, rank, world_size)
    raise ValueError(f"unknown workload kind {cfg.kind!r}")
