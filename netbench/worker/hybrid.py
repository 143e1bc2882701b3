"""The worker's side of G > 1: its groups, the hierarchical replicator, and the intra-node fields it records.

Kept apart from :mod:`netbench.worker.loop` so that a node with one worker runs exactly the
code it always did.
"""

from __future__ import annotations

from typing import Any

from netbench.replicators.hierarchical import HierarchicalReplicator
from netbench.worker.counters import read_counters
from netbench.worker.groups import Layout, build_groups

INTRA_STATS = ("intra_comm_s", "intra_payload_bytes", "intra_collectives")


def hierarchical_replicator(workload, spec, build, names) -> HierarchicalReplicator:
    """This rank's two groups and the FlexDeMo wrapper around the configured replicator."""
    layout = Layout(spec.world_size // spec.gpus_per_node, spec.gpus_per_node)
    groups = build_groups(layout, spec.rank)
    return HierarchicalReplicator(workload.parameters(), spec.replicator, build, groups.shard, groups.shard_ranks,
                                  groups.local_rank, groups.replica, names)


def intra_fields(worker, stats) -> dict[str, Any]:
    """The step's intra-node collectives and, when the spec names it, the intra-node link's counter deltas."""
    g = worker.spec.gpus_per_node
    out: dict[str, Any] = {"node": worker.spec.rank // g, "local_rank": worker.spec.rank % g}
    out.update({k: getattr(stats, k, 0) for k in INTRA_STATS})
    if worker.intra_before is not None:
        after = read_counters(worker.spec.intra_iface)
        out.update({f"intra_{k}": v for k, v in (after - worker.intra_before).as_dict().items() if k != "retrans_segs"})
        worker.intra_before = after
    return out


def done_fields(worker) -> dict[str, Any]:
    """Digests of the model and of this rank's slices after the last step (a test compares them across ranks)."""
    g = worker.spec.gpus_per_node
    return {"node": worker.spec.rank // g, "local_rank": worker.spec.rank % g, **worker.replicator.digests()}
