"""A worker's start record, as every kind of worker writes it (the run's reader checks it against the config)."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from netbench.worker.spec import WorkerSpec
from netbench.workloads import Workload

__all__ = ["start_event", "wait_for_gate"]

GATE_POLL_S = 0.005


def start_event(spec: WorkerSpec, workload: Workload, init_method: str, overlap_backward: bool) -> dict[str, Any]:
    """The worker's start record: where it runs, what it trains and how (the run's reader checks it against the
    config)."""
    return {
        "event": "start",
        "rank": spec.rank,
        "world_size": spec.world_size,
        "t": time.time(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "iface": spec.iface,
        "init_method": init_method,
        "threads": spec.threads,
        "steps": spec.steps,
        "warmup_steps": spec.warmup_steps,
        "timeout_s": spec.timeout_s,
        "n_params": workload.num_params(),
        "n_tensors": len(workload.parameters()),
        "workload": spec.workload.model_dump(),
        "replicator": spec.replicator.model_dump(),
        "overlap_backward": overlap_backward,
        "compute_scale": spec.compute_scale,
    }


def wait_for_gate(path: str | None, timeout_s: float) -> None:
    """Wait until the file ``path`` exists (the orchestrator's start gate; None: no gate)."""
    if path is None:
        return
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the orchestrator did not open the start gate within {timeout_s:.0f} s")
        time.sleep(GATE_POLL_S)
