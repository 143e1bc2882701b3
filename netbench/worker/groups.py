"""The two process groups of a node with G accelerators (DeToNATION's hybrid sharding).

World rank ``r = node * G + local_rank``. The sharding group is a node's G ranks; the
replication group is the ranks with one local rank on every node. ``dist.new_group`` is
collective over the whole world and must be called for every group in the same order on
every rank, so each rank creates all of them and keeps its own two.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Layout", "Groups", "build_groups"]


@dataclass(frozen=True)
class Layout:
    """Who is who in a world of ``nodes * g`` ranks."""

    nodes: int
    g: int

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.g < 1:
            raise ValueError(f"need at least one node and one accelerator per node, got {self.nodes} x {self.g}")

    @property
    def world_size(self) -> int:
        return self.nodes * self.g

    def node_of(self, rank: int) -> int:
        return rank // self.g

    def local_rank_of(self, rank: int) -> int:
        return rank % self.g

    def shard_ranks(self, node: int) -> list[int]:
        """A node's ranks, in local-rank order."""
        return [node * self.g + local for local in range(self.g)]

    def replica_ranks(self, local_rank: int) -> list[int]:
        """The ranks holding the same slices, one per node, in node order."""
        return [node * self.g + local_rank for node in range(self.nodes)]


@dataclass
class Groups:
    """This rank's sharding and replication groups (and their member ranks)."""

    layout: Layout
    rank: int
    shard: object
    replica: object

    @property
    def node(self) -> int:
        return self.layout.node_of(self.rank)

    @property
    def local_rank(self) -> int:
        return self.layout.local_rank_of(self.rank)

    @property
    def shard_ranks(self) -> list[int]:
        return self.layout.shard_ranks(self.node)

    @property
    def replica_ranks(self) -> list[int]:
        return self.layout.replica_ranks(self.local_rank)


def build_groups(layout: Layout, rank: int) -> Groups:
    """Create every sharding group, then every replication group (same order on all ranks); keep ours."""
    import torch.distributed as dist

    shard = replica = None
    for node in range(layout.nodes):
        group = dist.new_group(layout.shard_ranks(node))
        if node == layout.node_of(rank):
            shard = group
    for local in range(layout.g):
        group = dist.new_group(layout.replica_ranks(local))
        if local == layout.local_rank_of(rank):
            replica = group
    return Groups(layout, rank, shard, replica)
