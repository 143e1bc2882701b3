"""The worker's side of sharding: its groups, the sharded replicator, and the fields it records.

Sharding groups are a node's G workers or a site's workers (:mod:`netbench.worker.groups`). Kept
apart from :mod:`netbench.worker.loop` so that a flat run (every worker replicates the whole
model with every other) runs exactly the code it always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from netbench.counters import read_counters
from netbench.replicators.sharded import ShardedReplicator
from netbench.rundir.steps_schema import Col, column, numbers_text
from netbench.worker.groups import build_groups

if TYPE_CHECKING:
    from netbench.replicators.fsdp import FullyShardedReplicator

INTRA_STATS = (Col.INTRA_COMM_S, Col.INTRA_PAYLOAD_BYTES, Col.INTRA_COLLECTIVES)  # the replicator's StepStats names


def sharded_replicator(workload, spec, build, names) -> ShardedReplicator | FullyShardedReplicator:
    """This rank's two groups and the FlexDeMo wrapper around the configured replicator, or with ``shard_weights``
    FSDP's (the parameters at rest sharded, gathered per layer inside forward and backward)."""
    groups = build_groups(spec.layout(), spec.rank)
    if spec.shard_weights:
        from netbench.replicators.fsdp import FullyShardedReplicator  # late: torch's FSDP, for the runs that use it

        return FullyShardedReplicator(
            workload.model, spec.replicator, build, groups.shard, groups.shard_ranks, groups.replica, names
        )
    return ShardedReplicator(
        workload.parameters(),
        spec.replicator,
        build,
        groups.shard,
        groups.shard_ranks,
        groups.local_rank,
        groups.replica,
        names,
    )


def place_fields(spec) -> dict[str, Any]:
    """Where this rank sits: its node and local rank (rank = node * G + local rank) and, with groups in the spec
    (a site's ranks), its sharding group and its place in it."""
    g = spec.gpus_per_node
    out: dict[str, Any] = {Col.NODE: spec.rank // g, Col.LOCAL_RANK: spec.rank % g}
    if spec.shard_groups is not None:
        layout = spec.layout()
        out.update({Col.SHARD_GROUP: layout.group_of(spec.rank), Col.SHARD_RANK: layout.local_rank_of(spec.rank)})
    return out


def segments_s(began: float, computed: float, calls: Sequence[tuple[float, float]]) -> tuple[float, ...]:
    """The local work of a compute phase from ``began`` to ``computed`` between the ``calls`` it made, (start, end)
    in order: before the first, between each two, after the last (the dilation's padding included)."""
    edges = [began, *(t for call in calls for t in call), computed]
    return tuple(max(0.0, b - a) for a, b in zip(edges[::2], edges[1::2]))


def intra_fields(worker, stats, compute: tuple[float, float]) -> dict[str, Any]:
    """The step's collectives inside the sharding group and, when the spec names it, the intra-node link's counter
    deltas; with FSDP's calls inside the compute phase (``compute``: its start and end), the local work between
    them.
    """
    out = place_fields(worker.spec)
    out.update({k: getattr(stats, k, 0) for k in INTRA_STATS})
    calls = stats.intra_calls
    if calls:
        out[Col.INTRA_SEGMENTS_S] = numbers_text(segments_s(*compute, calls))
    if worker.intra_before is not None:
        after = read_counters(worker.spec.intra_iface)
        delta = (after - worker.intra_before).as_dict()
        out.update({column(f"intra_{k}"): v for k, v in delta.items() if k != Col.RETRANS_SEGS})
        worker.intra_before = after
    return out


def done_fields(worker) -> dict[str, Any]:
    """Digests of the model and of this rank's slices after the last step (a test compares them across ranks)."""
    return {**place_fields(worker.spec), **worker.replicator.digests()}
