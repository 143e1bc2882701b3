"""What an emulated cluster does that the model's real cluster does not, for predicting netbench runs.

The analytic model describes N machines, each with its own cores and a NIC at the link rate.
netbench emulates them as processes on one host behind tbf shapers, which differs in two ways
that show up in measured step times; both are computed from the host and the shaper's own
configuration, never fitted to measurements:

* **Shared cores.** N nodes on C cores: when every node encodes/decodes at the same moment
  (they do: the collectives keep them in step), CPU-bound work takes N/C times as long.
* **The token bucket.** tbf lets a full bucket (``burst`` bytes, 2 ms of line rate and at least
  10 frames) leave at veth speed; it refills at the link rate while the node computes, so each
  step's first ``min(burst, refilled)`` bytes do not wait for the rate. At 10mbit the bucket
  holds 15 kB, 12 ms: most of a small exchange (a sparse replicator's ~22 kB) on 2 nodes.
"""

from __future__ import annotations

from netbench.emulation.shaping import TbfParams
from netbench.emulation.spec import ClusterSpec

__all__ = ["cpu_share", "bucket_credit_s"]


def cpu_share(nodes: int, cpus: int) -> float:
    """How many times longer CPU-bound work takes when ``nodes`` processes do it at once on ``cpus`` cores."""
    return max(1.0, nodes / max(1, cpus))


def bucket_credit_s(
    cluster: ClusterSpec, idle_s: float, tx_bytes: float, through: tuple[float, float] | None = None
) -> float:
    """Seconds of a step's transfer that tbf's refilled bucket saves.

    The slowest shaper on the data's path bounds the transfer, so its rate and burst count: the access link's
    slower direction, ``tx_bytes`` being what the node sends, or, where ``through`` (rate, bytes a communicating step
    sends through it) names a slower link direction (a WAN between sites), that one's. ``idle_s`` is the time the
    link rests each step (the local work).
    """
    access = cluster.access
    rate = min(access.forward.rate_bps, access.reverse.rate_bps)
    if through is not None and through[0] < rate:
        rate, tx_bytes = through
    burst = TbfParams.for_rate(rate, cluster.offload_enabled).burst_bytes
    credit_bytes = min(burst, idle_s * rate / 8, tx_bytes)
    return max(0.0, credit_bytes) * 8 / rate
