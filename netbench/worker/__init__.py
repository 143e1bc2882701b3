"""The per-node worker: joins the gloo group, trains a workload through a replicator, records each step.

Names are loaded on first use: reading a worker's spec needs pydantic, and only running a worker needs torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = [
    "ResolvedSpec",
    "SpecError",
    "WorkerSpec",
    "load_spec",
    "resolve",
    "run_worker",
]

_HOMES = {
    "ResolvedSpec": "spec",
    "SpecError": "spec",
    "WorkerSpec": "spec",
    "load_spec": "spec",
    "resolve": "spec",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"netbench.worker.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'netbench.worker' has no attribute {name!r}")


def run_worker(resolved: Any, after_steps: Callable[[], None] | None = None) -> int:
    """Run one worker to completion (see :mod:`netbench.worker.loop`); imported lazily to keep torch off the spec
    path.
    """
    from netbench.worker.loop import run_worker as _run  # late: keeps torch off this module's import

    return _run(resolved, after_steps)
