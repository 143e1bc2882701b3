"""Plain, JSON-ready records of step estimates (what ``plan --json`` prints and reports embed)."""

from __future__ import annotations

from typing import Any

from netbench.model.calibration import Calibration
from netbench.model.steptime import StepEstimate

__all__ = ["estimate_row"]


def estimate_row(est: StepEstimate, calibration: Calibration) -> dict[str, Any]:
    """One table row: per node, per step (periodic exchanges averaged), bytes and seconds."""
    sc = est.scenario
    tx, rx = est.tx, est.rx
    return {
        "replicator": est.scheme,
        "nodes": sc.workers,
        "machines": sc.machines,
        "gpus_per_node": sc.gpus_per_node,
        "bw_bps": sc.bw_bps,
        "up_bps": sc.up_bps,
        "down_bps": sc.down_bps,
        "delay_s": sc.delay_s,
        "algorithm": sc.algorithm,
        "params": est.params,
        "payload_bytes_per_step": est.payload_bytes_per_step,
        "wire_bytes_per_step": {"tx": tx.total, "rx": rx.total},
        "payload_wire_bytes_per_step": {"tx": tx.payload, "rx": rx.payload},
        "framing_bytes_per_step": {"tx": tx.overhead, "rx": rx.overhead},
        "wire_efficiency": tx.payload / tx.total if tx.total else None,
        "comm_time_s": est.comm_time_s,
        "comm_latency_s": est.wire.latency_s,
        "comm_transfer_s": est.wire.transfer_s,
        "intra_time_s": est.intra_time_s,
        "compression_time_s": est.compression_time_s,
        "compression_calibrated": est.scheme in calibration.encode_s_per_param,
        "compute_time_s": est.compute_time_s,
        "step_time_s": est.step_time_s,
        "comm_fraction": est.comm_fraction,
        "overlap": est.overlap,
        "exchanges": [
            {
                "label": e.label,
                "collective": e.collective,
                "bytes_per_step": e.bytes_per_step,
                "period": e.period,
                "calls": e.calls,
            }
            for e in est.exchanges
        ],
    }
