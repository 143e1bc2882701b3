"""A run's settings given as intents (``compression``, ``auto_bucket``), turned into the replicator's own numbers.

`netbench run`, `worker` and a library caller of :func:`netbench.orchestrator.run.runner.run` get the
same numbers from here; `netbench plan` sizes buckets with
:func:`netbench.model.overlap.bucket_mb_for_shapes`, the same rule.
"""

from __future__ import annotations

from netbench.declarations.compression import compression_settings
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import declared_payload
from netbench.emulation.spec import ClusterSpec
from netbench.model.network import GraphModel
from netbench.model.overlap import bucket_mb_for_shapes
from netbench.orchestrator.config import RunConfig
from netbench.workloads.config import BACKWARD_OVERLAP_WORKLOADS

__all__ = ["resolve", "with_compression", "bucket_link", "check_payload"]


def with_compression(replicator: ReplicatorConfig, fraction: float) -> ReplicatorConfig:
    """``replicator`` sending ``fraction`` of each tensor's values (each declaration maps it onto its own setting)."""

    update = compression_settings(replicator.name, fraction, replicator.chunk)
    return ReplicatorConfig.model_validate({**replicator.model_dump(), **update})


def bucket_link(cluster: ClusterSpec, gpus_per_node: int = 1) -> tuple[float | None, float]:
    """(rate, round trip) automatic buckets are sized for: the ring's bottleneck on the cluster's graph and placement
    (a WAN link or a rack uplink where one is the narrowest, shared by the hops that cross it; on the star
    ``min(up, down)`` and the round trip). With several workers per node, or a real host's link of unknown rate (None),
    the first rank's access link alone."""
    rates = (cluster.access.forward.rate_bps, cluster.access.reverse.rate_bps)
    if gpus_per_node > 1 or None in rates:
        known = [r for r in rates if r is not None]
        return (min(known) if known else None), cluster.expected_rtt_s()

    return GraphModel(cluster.topology, cluster.placement).ring_link()


def _auto_bucket(config: RunConfig, replicator: ReplicatorConfig) -> ReplicatorConfig:
    """``replicator`` with buckets sized from the run's link; unchanged where no link rate is known (one bucket)."""
    rate, rtt = bucket_link(config.cluster, config.gpus_per_node)
    if rate is None:
        return replicator
    from netbench.orchestrator.prediction import workload_shapes  # late: keeps pandas off this module's import

    nodes = config.cluster.nodes
    backward = replicator.overlap_backward and config.workload.kind in BACKWARD_OVERLAP_WORKLOADS
    value = bucket_mb_for_shapes(
        replicator,
        workload_shapes(config.workload, nodes),
        rate,
        rtt,
        nodes,
        backward=backward,
        concurrent=config.gpus_per_node == 1,
    )
    return replicator.model_copy(update={"bucket_mb": value})


def resolve(config: RunConfig) -> RunConfig:
    """``config`` with ``compression`` applied to its replicator, then ``auto_bucket`` sized from its link.

    Idempotent: applying it to its own result changes nothing (the intents stay recorded beside the numbers).
    """
    replicator = config.replicator
    if config.compression is not None:
        replicator = with_compression(replicator, config.compression)
    if config.auto_bucket:
        replicator = _auto_bucket(config, replicator)
    if replicator == config.replicator:
        return config
    return config.model_copy(update={"replicator": replicator})


def check_payload(config: RunConfig) -> None:
    """Raise :class:`~netbench.declarations.spec.SettingError` where the replicator's payload formula rejects the run's
    model (Streaming DiLoCo's fragments that do not divide its layers): before anything is built."""
    from netbench.orchestrator.prediction import workload_shapes  # late: keeps pandas off this module's import

    nodes = config.cluster.nodes
    declared_payload(workload_shapes(config.workload, nodes), config.replicator, nodes)
