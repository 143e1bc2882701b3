"""The per-node worker: joins the gloo group, trains a workload through a replicator, records each step."""

from collections.abc import Callable

from netbench.worker.counters import IfaceCounters, read_counters
from netbench.worker.spec import ResolvedSpec, SpecError, WorkerSpec, load_spec, resolve

__all__ = ["IfaceCounters", "ResolvedSpec", "SpecError", "WorkerSpec", "load_spec", "read_counters", "resolve", "run_worker"]


def run_worker(resolved: ResolvedSpec, after_steps: Callable[[], None] | None = None) -> int:
    """Run one worker to completion (see :mod:`netbench.worker.loop`); imported lazily to keep torch off the spec path."""
    from netbench.worker.loop import run_worker as _run

    return _run(resolved, after_steps)
