"""Time dilation (DieCast, Gupta et al., NSDI'08): emulate a cluster of N machines on C < N cores.

Slow every link by a factor k (rate / k, delay and jitter x k) and every emulated compute
(the ``shapes`` workload's stand-in forward/backward, x k), run, and divide every measured
duration by k. Network time then stretches exactly k-fold, and the host's cores, shared by N
nodes, need to serve only 1/k of the packet and CPU work per second.

CPU work the nodes really do (encode, decode, the optimizer's update, a real model's forward and
backward) is not slowed on purpose: on N nodes sharing C cores it is already stretched by the
sharing, N/C times when every node works at once (the collectives keep them in step). With
k = N/C (``auto``) that stretch equals the dilation, so dividing by k leaves each node's CPU
time as if it had a core of its own -- which is why ``auto`` picks k = nodes / cores, and why
the prediction for a dilated run takes one core per node. Other values of k leave CPU work
stretched by N/C / k: the fidelity check flags the run when the cores are still saturated.

The run directory keeps the real (dilated) timings in ``workers/rank*.jsonl`` and the divided
ones in ``steps.csv`` and the summary; ``run.json`` records k and the dilated cluster.
"""

from __future__ import annotations

import math
from typing import Any

from netbench.orchestrator.config import RunConfig

__all__ = ["TIMED_FIELDS", "auto_factor", "parse_dilation", "dilate", "undilate_records"]

# step record durations (seconds) that are divided by k; t_start/t_end stay real (the capture's step windows use them)
TIMED_FIELDS = ("compute_s", "compress_s", "comm_s", "decode_s", "apply_s", "step_s")
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


def undilate_records(records: dict[int, list[dict[str, Any]]], k: float) -> dict[int, list[dict[str, Any]]]:
    """Step records with every duration divided by ``k`` (what the undilated cluster would have measured)."""
    if k == 1.0:
        return records
    return {rank: [{**r, **{f: r[f] / k for f in TIMED_FIELDS if isinstance(r.get(f), (int, float))}} if r.get("event") == "step" else r
                   for r in recs]
            for rank, recs in records.items()}
