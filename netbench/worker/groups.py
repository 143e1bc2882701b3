"""The two process groups of sharding (DeToNATION's FlexDeMo): shard inside a group, replicate between
groups.

A layout is a list of sharding groups: equal-sized lists of ranks that together hold every rank once. Its members
shard the model (the G workers of a node, or every worker of a site); the replication group of position ``k`` is the
``k``-th rank of every sharding group, so each holds the same slices. The G-per-node layout (rank = node * G + local
rank) is one case of it (:meth:`Layout.per_node`), the ranks on each site's nodes another (:meth:`Layout.per_site`).

``dist.new_group`` is collective over the whole world and must be called for every group in the same order on every
rank, so each rank creates all of them and keeps its own two.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Layout", "Groups", "build_groups"]


@dataclass(frozen=True)
class Layout:
    """Who shards with whom: ``shards[i]`` are the ranks of sharding group ``i``, in ring order."""

    shards: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        sizes = sorted({len(s) for s in self.shards})
        if not self.shards or sizes[0] < 1:
            raise ValueError("need at least one sharding group of at least one rank")
        if len(sizes) > 1:
            raise ValueError(f"sharding groups must all have the same size, got sizes {', '.join(map(str, sizes))}")
        ranks = sorted(r for s in self.shards for r in s)
        if ranks != list(range(len(ranks))):
            raise ValueError(f"sharding groups must hold every rank 0-{len(ranks) - 1} once")

    @classmethod
    def per_node(cls, nodes: int, g: int) -> Layout:
        """``nodes`` groups of ``g`` consecutive ranks: the G workers of each node (rank = node * G + local rank)."""
        if nodes < 1 or g < 1:
            raise ValueError(f"need at least one node and one accelerator per node, got {nodes} x {g}")
        return cls(tuple(tuple(range(n * g, (n + 1) * g)) for n in range(nodes)))

    @classmethod
    def per_site(cls, sites: Iterable[Sequence[int]], placement: Sequence[int], g: int = 1) -> Layout:
        """One group per site: the ranks whose node (``placement[rank // g]``) is among the site's node indices."""
        node_site = {node: i for i, nodes in enumerate(sites) for node in nodes}
        shards: list[list[int]] = [[] for _ in range(len(set(node_site.values())))]
        for rank in range(len(placement) * g):
            shards[node_site[placement[rank // g]]].append(rank)
        return cls(tuple(tuple(s) for s in shards))

    @property
    def count(self) -> int:
        """Sharding groups (nodes or sites): the size of every replication group."""
        return len(self.shards)

    @property
    def g(self) -> int:
        """Ranks per sharding group: the model is cut into this many slices."""
        return len(self.shards[0])

    @property
    def world_size(self) -> int:
        return self.count * self.g

    def group_of(self, rank: int) -> int:
        return next(i for i, s in enumerate(self.shards) if rank in s)

    def local_rank_of(self, rank: int) -> int:
        """``rank``'s place in its sharding group: which slices it owns."""
        return self.shards[self.group_of(rank)].index(rank)

    def shard_ranks(self, group: int) -> list[int]:
        """A sharding group's ranks, in ring order."""
        return list(self.shards[group])

    def replica_ranks(self, local_rank: int) -> list[int]:
        """The ranks holding the same slices, one per sharding group, in group order."""
        return [s[local_rank] for s in self.shards]


@dataclass
class Groups:
    """This rank's sharding and replication groups (and their member ranks)."""

    layout: Layout
    rank: int
    shard: object
    replica: object

    @property
    def group(self) -> int:
        return self.layout.group_of(self.rank)

    @property
    def local_rank(self) -> int:
        return self.layout.local_rank_of(self.rank)

    @property
    def shard_ranks(self) -> list[int]:
        return self.layout.shard_ranks(self.group)

    @property
    def replica_ranks(self) -> list[int]:
        return self.layout.replica_ranks(self.local_rank)


def build_groups(layout: Layout, rank: int) -> Groups:
    """Create every sharding group, then every replication group (same order on all ranks); keep ours."""
    import torch.distributed as dist  # late: keeps torch off this module's import

    shard = replica = None
    for i in range(layout.count):
        group = dist.new_group(layout.shard_ranks(i))
        if i == layout.group_of(rank):
            shard = group
    for local in range(layout.g):
        group = dist.new_group(layout.replica_ranks(local))
        if local == layout.local_rank_of(rank):
            replica = group
    return Groups(layout, rank, shard, replica)
