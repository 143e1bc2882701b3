"""Fully sharded data parallelism (ZeRO-3, torch's FSDP) around any replicator: torch's ``fully_shard`` on
netbench's collectives.

Every layer of the model (:func:`shard_modules`) is a ``fully_shard`` unit over the sharding group of N ranks, so its
parameters rest sharded along their first dimension (padded to a multiple of N, as FSDP2 pads them): each rank
holds ``ceil(d0 / N)`` rows of every parameter. Inside the workload's forward and backward, torch gathers each
layer's parameters before its forward and again before its backward (``reshard_after_forward``), and
reduce-scatters its gradients after its backward; this class only supplies the two collectives:

* the all-gather is gloo's ring all-gather of the layer's shards (:meth:`GroupComm.all_gather`);
* the reduce-scatter is :func:`netbench.replicators.sharded.ring_reduce_scatter`, a ring of point-to-point sends
  (gloo's own reduce_scatter on CPU is a full all-reduce and a slice, which would put twice the ring's bytes on
  the wire).

Both run where torch calls them, one layer at a time, each finished before the layer computes: on gloo's CPU
stream nothing is prefetched behind compute. Their time is booked as the sharding group's collectives and taken
out of the step's compute by the worker, and when each ran is handed to the worker (``intra_calls``), which records
the local work between them: every one of them waits for the group's slowest rank to reach it.

The wrapped replicator then synchronises each rank's shards with the ranks holding the same shards in the other
sharding groups (HSDP: a site's ranks shard, the replicator runs between sites) and its base optimizer updates
them in place, which is where FSDP keeps them. With one sharding group (FSDP alone) its group is the rank itself:
its collectives reach no other rank, so the step's payload counts none of their bytes (a step's payload is what
the rank hands to other ranks: FSDP's gathers and reduce-scatters are booked as the sharding group's).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.shards import shard_units
from netbench.replicators.base import StepStats
from netbench.replicators.comm import GroupComm
from netbench.replicators.sharded import ShardedStepStats, ring_reduce_scatter
from netbench.shapes import ParamShape

__all__ = ["shard_modules", "FullyShardedReplicator"]


def shard_modules(model: nn.Module) -> list[nn.Module]:
    """The layers gathered one at a time, as the model's parameter names group them
    (:func:`netbench.declarations.shards.unit_of`: what the model prices), the root last (it holds the rest)."""
    names = shard_units([ParamShape(n, tuple(p.shape)) for n, p in model.named_parameters() if p.requires_grad])
    return [model.get_submodule(name) for name in names if name] + [model]


class _Gather(AllGather):
    """A layer's shards gathered by gloo's ring all-gather; booked as one collective of this rank's share."""

    def __init__(self, comm: GroupComm, calls: list[tuple[float, float]]) -> None:
        self.comm, self.calls = comm, calls

    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, async_op: bool = False) -> None:
        started = time.perf_counter()
        self.comm.all_gather(input_tensor.view(-1), output_tensor.view(self.comm.world_size, -1))
        self.calls.append((started, time.perf_counter()))


class _ReduceScatter(ReduceScatter):
    """A layer's gradients summed over the group by a ring of point-to-point sends; booked as the whole buffer
    (as an all-reduce counts it)."""

    def __init__(self, comm: GroupComm, members: Sequence[int], calls: list[tuple[float, float]]) -> None:
        self.comm, self.members, self.calls = comm, list(members), calls

    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, op, async_op: bool = False) -> None:
        n = len(self.members)
        started = time.perf_counter()
        buf = input_tensor.view(n, -1)
        mine = ring_reduce_scatter(buf, self.members, self.comm.rank, group)
        ended = time.perf_counter()
        self.comm.book(input_tensor.numel() * input_tensor.element_size(), ended - started)
        self.calls.append((started, ended))
        output_tensor.copy_(mine)
        if op == dist.ReduceOp.AVG:
            output_tensor.div_(n)


class FullyShardedReplicator:
    """FSDP inside the sharding group, the wrapped replicator on the shards between groups.

    ``shard_group``/``shard_ranks``: the ranks that shard the model (global ranks, in group order);
    ``replica_group``: the ranks holding the same shards in the other groups. The inner replicator
    (``build(params, config, group, names)``) owns the shards and the base optimizer.
    """

    def __init__(
        self,
        model: nn.Module,
        config: ReplicatorConfig,
        build,
        shard_group,
        shard_ranks: Sequence[int],
        replica_group,
        names: Sequence[str] | None = None,
    ) -> None:
        self.model = model
        self.intra = GroupComm(shard_group)
        mesh = DeviceMesh.from_group(shard_group, "cpu")
        self._calls: list[tuple[float, float]] = []  # (start, end) of each collective inside forward and backward
        gather, reduce = _Gather(self.intra, self._calls), _ReduceScatter(self.intra, shard_ranks, self._calls)
        for module in shard_modules(model):
            fully_shard(module, mesh=mesh, reshard_after_forward=True)
            module.set_custom_all_gather(gather)
            module.set_custom_reduce_scatter(reduce)
        self.params = [p for p in model.parameters() if p.requires_grad]
        # the shards FSDP keeps, as plain parameters on the same storage: the inner optimizer updates them in place
        self.slices = [nn.Parameter(p.to_local().detach()) for p in self.params]
        self.inner = build(self.slices, config, replica_group, names)
        self.replicated = GroupComm(replica_group).world_size > 1  # other sharding groups hold these shards
        self.config = config
        self._in_compute = (0.0, 0, 0)

    @property
    def optimizer(self):
        return self.inner.optimizer

    def step(self) -> ShardedStepStats:
        """The gradients' shards (reduce-scattered in backward) to the inner replicator, which updates the shards."""
        in_compute = self.intra.take()  # the gathers and reduce-scatters that ran inside forward and backward
        timed, self._calls[:] = tuple(self._calls), []
        for p, s in zip(self.params, self.slices):
            s.grad = p.grad.to_local() if p.grad is not None else torch.zeros_like(s)
        stats = self.inner.step()
        fields = {k: getattr(stats, k) for k in StepStats.__dataclass_fields__}
        if not self.replicated:
            fields["payload_bytes"] = 0
        _, nbytes, calls = in_compute
        seconds = sum(end - start for start, end in timed)  # each call as torch waited for it, its copies included
        return ShardedStepStats(
            **fields,
            intra_comm_s=seconds,
            intra_payload_bytes=nbytes,
            intra_collectives=calls,
            intra_in_compute_s=seconds,
            intra_calls=timed,
        )

    def digests(self) -> dict[str, str]:
        """sha256 of the whole model (gathered: every rank of the group must call this) and of this rank's shards."""
        model = hashlib.sha256()
        for p in self.params:
            model.update(p.full_tensor().detach().contiguous().numpy().tobytes())
        shard = hashlib.sha256()
        for s in self.slices:
            shard.update(s.detach().contiguous().numpy().tobytes())
        return {"model_sha256": model.hexdigest(), "shard_sha256": shard.hexdigest()}
