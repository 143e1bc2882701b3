"""FlexDeMo's sharded step (DeToNATION, Algorithm 1) around any replicator.

A node of G accelerators shards every parameter along its first dimension (as FSDP2 does; the
dimension padded to a multiple of G), so each accelerator owns a ``ceil(d0 / G)``-row slice:

1. reduce-scatter the gradient inside the node (sharding group): each accelerator gets the
   node's mean gradient of its own slices;
2. the wrapped replicator synchronises those slices with the accelerators that hold the same
   slices on the other nodes (replication group), and its base optimizer updates them;
3. all-gather the updated slices inside the node, so every accelerator holds the whole model.

Only step 2 crosses the slow inter-node link, so the inter-node payload per node is the
replicator's on the whole model, whatever G is. The reduce-scatter is a ring of point-to-point
sends (gloo's own reduce_scatter on CPU is a full all-reduce and a slice, which would put 1.5x
the ring's bytes on the intra-node link); with the all-gather it moves exactly a ring
all-reduce's bytes, which is what :mod:`netbench.model.steptime` charges the intra-node link.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.shards import slice_rows
from netbench.replicators.base import StepStats
from netbench.replicators.comm import GroupComm

__all__ = ["ShardLayout", "ShardedStepStats", "ShardedReplicator", "ring_reduce_scatter"]


@dataclass(frozen=True)
class ShardLayout:
    """Where each parameter's slices live in a node's flat (G, S) buffer: row r holds accelerator r's slices."""

    g: int
    shapes: tuple[tuple[int, ...], ...]  # full parameter shapes
    offsets: tuple[int, ...]  # start of each parameter's slice within a row
    sizes: tuple[int, ...]  # elements of each slice

    @classmethod
    def of(cls, shapes: Sequence[Sequence[int]], g: int) -> ShardLayout:
        if g < 1:
            raise ValueError(f"G must be at least 1, got {g}")
        offsets, sizes, at = [], [], 0
        for shape in shapes:
            rest = 1
            for d in tuple(shape)[1:]:
                rest *= d
            n = slice_rows(shape, g) * rest
            offsets.append(at)
            sizes.append(n)
            at += n
        return cls(g, tuple(tuple(s) for s in shapes), tuple(offsets), tuple(sizes))

    @property
    def row_numel(self) -> int:
        """S: elements one accelerator owns."""
        return self.offsets[-1] + self.sizes[-1] if self.sizes else 0

    def slice_shape(self, i: int) -> tuple[int, ...]:
        shape = self.shapes[i]
        return (slice_rows(shape, self.g), *shape[1:]) if shape else (1,)

    def pack(self, tensors: Sequence[torch.Tensor], out: torch.Tensor) -> torch.Tensor:
        """Full tensors -> ``out`` (G, S), zero padding at each first dimension's end."""
        for i, t in enumerate(tensors):
            flat = t.reshape(-1)
            block = out[:, self.offsets[i] : self.offsets[i] + self.sizes[i]]  # (G, n) strided view
            padded = torch.zeros(self.g * self.sizes[i], dtype=t.dtype, device=t.device)
            padded[: flat.numel()] = flat
            block.copy_(padded.view(self.g, self.sizes[i]))
        return out

    def unpack(self, buf: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
        """``buf`` (G, S) -> full tensors in place (the padding dropped)."""
        for i, t in enumerate(tensors):
            block = buf[:, self.offsets[i] : self.offsets[i] + self.sizes[i]].reshape(-1)
            t.view(-1).copy_(block[: t.numel()])

    def row(self, buf_row: torch.Tensor, i: int) -> torch.Tensor:
        """Parameter ``i``'s slice within one row, shaped like the slice."""
        return buf_row[self.offsets[i] : self.offsets[i] + self.sizes[i]].view(self.slice_shape(i))


def ring_reduce_scatter(buf: torch.Tensor, members: Sequence[int], me: int, group) -> torch.Tensor:
    """Sum ``buf`` (G, S) over ``members`` (global ranks, in group order) so row ``me`` ends up reduced; returns it.

    G - 1 rounds; in each, every member sends one row to the next member and adds the row it
    receives from the previous one: (G - 1) / G of the buffer leaves each member, as in the
    reduce-scatter half of a ring all-reduce.
    """
    g = len(members)
    nxt, prv = members[(me + 1) % g], members[(me - 1) % g]
    incoming = torch.empty_like(buf[0])
    for s in range(g - 1):
        send_idx, recv_idx = (me - 1 - s) % g, (me - 2 - s) % g
        outgoing = buf[send_idx].contiguous()
        ops = [dist.P2POp(dist.isend, outgoing, nxt, group), dist.P2POp(dist.irecv, incoming, prv, group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        buf[recv_idx].add_(incoming)
    return buf[me]


@dataclass
class ShardedStepStats(StepStats):
    """A replicator's stats (the inter-node part) plus the intra-node collectives of the step."""

    intra_comm_s: float = 0.0
    intra_payload_bytes: int = 0
    intra_collectives: int = 0
    intra_in_compute_s: float = 0.0  # of intra_comm_s, what ran inside forward and backward (FSDP's gathers)
    intra_calls: tuple[tuple[float, float], ...] = ()  # those calls' (start, end), time.perf_counter


class ShardedReplicator:
    """Shard inside a node, replicate each slice between nodes with the wrapped replicator, gather back.

    ``shard_group``/``shard_ranks``: the node's G accelerators (global ranks, local-rank order);
    ``replica_group``: the accelerators with this local rank on every node. The inner replicator
    (``build(params, config, group, names)``) owns the slices and the base optimizer.
    """

    def __init__(
        self,
        params: Sequence[torch.nn.Parameter],
        config: ReplicatorConfig,
        build,
        shard_group,
        shard_ranks: Sequence[int],
        local_rank: int,
        replica_group,
        names: Sequence[str] | None = None,
    ) -> None:
        self.params = list(params)
        self.g = len(shard_ranks)
        self.local_rank = local_rank
        self.shard_group, self.shard_ranks = shard_group, list(shard_ranks)
        self.layout = ShardLayout.of([tuple(p.shape) for p in self.params], self.g)
        device = self.params[0].device if self.params else torch.device("cpu")
        self.full = torch.zeros((self.g, self.layout.row_numel), dtype=torch.float32, device=device)
        with torch.no_grad():
            self.layout.pack([p.detach() for p in self.params], self.full)
        row = self.full[local_rank].clone()
        self.slices = [torch.nn.Parameter(self.layout.row(row, i).clone()) for i in range(len(self.params))]
        self.intra = GroupComm(shard_group)
        self.inner = build(self.slices, config, replica_group, names)
        self.config = config

    @property
    def optimizer(self):
        return self.inner.optimizer

    def step(self) -> ShardedStepStats:
        """Reduce-scatter, replicate and update the slices, all-gather: one FlexDeMo step."""
        with torch.no_grad():
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
            self.layout.pack(grads, self.full)
            started = time.perf_counter()
            mine = ring_reduce_scatter(self.full, self.shard_ranks, self.local_rank, self.shard_group)
            self.intra.book(
                self.full.numel() * self.full.element_size(), time.perf_counter() - started
            )  # the buffer, as an all-reduce counts it
            mine.div_(self.g)
            for i, s in enumerate(self.slices):
                s.grad = self.layout.row(mine, i).clone()
        stats = self.inner.step()
        with torch.no_grad():
            own = torch.cat([s.detach().reshape(-1) for s in self.slices])
            self.intra.all_gather(own, self.full)
            self.layout.unpack(self.full, [p.data for p in self.params])
        intra_s, intra_bytes, intra_calls = self.intra.take()
        fields = {k: getattr(stats, k) for k in StepStats.__dataclass_fields__}
        return ShardedStepStats(
            **fields, intra_comm_s=intra_s, intra_payload_bytes=intra_bytes, intra_collectives=intra_calls
        )

    def digests(self) -> dict[str, str]:
        """sha256 of the whole model and of this accelerator's slices: equal models have equal digests."""
        model = hashlib.sha256()
        for p in self.params:
            model.update(p.detach().contiguous().numpy().tobytes())
        shard = hashlib.sha256()
        for s in self.slices:
            shard.update(s.detach().contiguous().numpy().tobytes())
        return {"model_sha256": model.hexdigest(), "shard_sha256": shard.hexdigest()}
