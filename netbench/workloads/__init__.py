"""Workloads: what each emulated node trains (a tiny GPT, a teacher-student MLP, or a preset's shapes).

``WorkloadConfig`` imports without torch, so specs can be built and validated by tools that never
train; ``build_workload`` and ``Workload`` load torch on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from netbench.workloads.config import WORKLOAD_KINDS, WorkloadConfig, WorkloadKind

if TYPE_CHECKING:
    from netbench.workloads.base import Workload
    from netbench.workloads.build import build_workload

__all__ = ["Workload", "WorkloadConfig", "WorkloadKind", "WORKLOAD_KINDS", "build_workload"]


def __getattr__(name: str) -> Any:
    if name == "build_workload":
        from netbench.workloads.build import build_workload  # late: keeps torch off this module's import

        return build_workload
    if name == "Workload":
        from netbench.workloads.base import Workload  # late: keeps torch off this module's import

        return Workload
    raise AttributeError(f"module 'netbench.workloads' has no attribute {name!r}")
