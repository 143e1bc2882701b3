"""Time dilation (DieCast, Gupta et al., NSDI'08): emulate a cluster of N machines on C < N cores.

Slow every link by a factor k (rate / k, delay and jitter x k) and every emulated compute
(the ``shapes`` workload's stand-in forward/backward, x k), run, and divide every measured
duration by k. Network time then stretches exactly k-fold, and the host's cores, shared by N
nodes, need to serve only 1/k of the packet and CPU work per second.

CPU work the nodes really do (encode, decode, the optimizer's update, a real model's forward and
backward) is not slowed on purpose: on N nodes sharing C cores it is already stretched by the
sharing -- up to N/C times when every node works at once, less when they do not. So it is
counted as CPU time, not divided by k: its durations are divided by the stretch the run measured
(each worker's time on a core plus its time waiting for one, over its time on a core, from
``/proc/PID/schedstat``; see :mod:`netbench.orchestrator.fidelity`), at most k. ``auto`` picks
k = nodes / cores, so that each node gets a core's worth of CPU per dilated second and the
prediction for a dilated run gives each node a core of its own.

The run directory keeps the real (dilated) timings in ``workers/rank*.jsonl`` and the divided
ones in ``steps.csv`` and the summary; ``run.json`` records k and the dilated cluster.
"""

from __future__ import annotations

import math
from typing import Any

from netbench.orchestrator.config import RunConfig

__all__ = ["TIMED_FIELDS", "CPU_FIELDS", "auto_factor", "parse_dilation", "dilate", "cpu_stretch", "undilate_records"]

# step record durations (seconds) that are divided by k; t_start/t_end stay real (the capture's step windows use them)
TIMED_FIELDS = ("compute_s", "compress_s", "comm_s", "decode_s", "apply_s", "step_s")
# the ones that are the node's own CPU work (compute too, for a real model), divided by the measured CPU stretch instead
CPU_FIELDS = ("compress_s", "decode_s", "apply_s")
MAX_FACTOR = 1000.0


def auto_factor(nodes: int, cpus: int) -> float:
    """k = nodes / cores, at least 1: each node gets one core's worth of CPU per dilated second."""
    return max(1.0, nodes / max(1, cpus))


def parse_dilation(text: str, nodes: int, cpus: int) -> float:
    """``--dilation``: ``auto`` or a number in [1, 1000]; raises ValueError with the reason."""
    if text.strip().lower() == "auto":
        return auto_factor(nodes, cpus)
    try:
        k = float(text)
    except ValueError:
        raise ValueError(f"expected a number >= 1 or auto, got {text!r}") from None
    if not math.isfinite(k) or not 1.0 <= k <= MAX_FACTOR:
        raise ValueError(f"must be between 1 and {MAX_FACTOR:g} (or auto), got {text!r}")
    return k


def dilate(config: RunConfig, k: float) -> RunConfig:
    """The configuration the emulator actually runs: links k times slower and longer, compute k times longer."""
    if k == 1.0:
        return config
    cluster = config.cluster
    slowed = {
        side: getattr(cluster, side).model_copy(update={
            "rate_bps": getattr(cluster, side).rate_bps / k,
            "delay_s": getattr(cluster, side).delay_s * k,
            "jitter_s": getattr(cluster, side).jitter_s * k,
        })
        for side in ("up", "down")
    }
    workload = config.workload.model_copy(update={"compute_ms": config.workload.compute_ms * k})
    timeout = config.timeout_s * k if config.timeout_s else None
    return config.model_copy(update={"cluster": cluster.model_copy(update=slowed), "workload": workload, "timeout_s": timeout})


def cpu_stretch(observed: dict[str, Any] | None, k: float) -> float:
    """How much longer the workers' CPU work took than their CPU time: (on a core + waiting) / on a core, in [1, k].

    ``k`` (every duration treated alike) when the run was too short to observe.
    """
    if not observed or not observed.get("worker_cpu_mean") or observed.get("worker_wait_mean") is None:
        return k
    return min(k, max(1.0, 1.0 + observed["worker_wait_mean"] / observed["worker_cpu_mean"]))


def undilate_records(records: dict[int, list[dict[str, Any]]], k: float, stretch: float | None = None,
                     cpu_fields: tuple[str, ...] = CPU_FIELDS) -> dict[int, list[dict[str, Any]]]:
    """Step records as the undilated cluster would have measured them.

    Network and emulated compute: divided by ``k``. ``cpu_fields`` (the node's own CPU work):
    divided by ``stretch`` (default ``k``). ``step_s`` is rebuilt alike: its CPU part by
    ``stretch``, the rest by ``k``.
    """
    if k == 1.0:
        return records
    stretch = k if stretch is None else stretch

    def one(r: dict[str, Any]) -> dict[str, Any]:
        if r.get("event") != "step":
            return r
        out = dict(r)
        cpu = 0.0
        for f in TIMED_FIELDS:
            if f != "step_s" and isinstance(r.get(f), (int, float)):
                mine = f in cpu_fields
                cpu += r[f] if mine else 0.0
                out[f] = r[f] / (stretch if mine else k)
        if isinstance(r.get("step_s"), (int, float)):
            out["step_s"] = (r["step_s"] - cpu) / k + cpu / stretch
        return out

    return {rank: [one(r) for r in recs] for rank, recs in records.items()}
