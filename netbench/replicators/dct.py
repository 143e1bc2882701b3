"""DeMo (decoupled momentum, DCT top-k) replication with one packed all-gather per step."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from netbench.replicators.base import PayloadDecl, Replicator, StepTimer
from netbench.replicators.config import ReplicatorConfig
from netbench.replicators.dct_codec import DCTCodec
from netbench.replicators.tiling import TilePlan
from netbench.replicators.wire import WireLayout
from netbench.shapes import ParamShape

__all__ = ["DCTReplicator"]


def _wire_layout(plan: TilePlan, config: ReplicatorConfig) -> WireLayout:
    return WireLayout.for_config([b.tiles * b.k for b in plan.buckets], config, plan.max_tile_numel)


class DCTReplicator(Replicator):
    """Each rank keeps its own momentum (in DCT space) and shares only its top-k coefficients.

    Step: ``M = beta M + T(grad)``; take the k largest |M| of every tile; pack values and
    positions into one byte buffer; subtract what was sent from ``M``; all-gather the buffers;
    average the coefficients; one inverse DCT; optionally sign; base optimizer (SGD by default,
    as DeMo). See :mod:`netbench.replicators.dct_codec` for the batching and
    :mod:`netbench.replicators.tiling` for tensors whose sides are not multiples of the chunk.
    """

    name = "dct"
    default_optimizer = "sgd"
    default_lr = 1e-3

    def __init__(self, params: Sequence[torch.nn.Parameter], config: ReplicatorConfig, group=None,
                 names: Sequence[str] | None = None) -> None:
        super().__init__(params, config, group, names)
        self.codec = DCTCodec([tuple(p.shape) for p in self.params], config.chunk, config.topk)
        plan = self.codec.plan
        self.wire = _wire_layout(plan, config)
        self.send = torch.empty(self.wire.nbytes, dtype=torch.uint8)
        self.recv = torch.empty((self.comm.world_size, self.wire.nbytes), dtype=torch.uint8)
        world = self.comm.world_size
        self._recv_indices = [torch.empty(b.tiles, world, b.k, dtype=torch.int64) for b in plan.buckets]
        self._recv_values = [torch.empty(b.tiles, world, b.k) for b in plan.buckets]

    @classmethod
    def payload(cls, shapes: Sequence[ParamShape], config: ReplicatorConfig, world_size: int) -> PayloadDecl:
        plan = TilePlan(shapes, config.chunk, config.topk)
        return PayloadDecl("all_gather", _wire_layout(plan, config).nbytes)

    def encode(self) -> torch.Tensor:
        """Fold this step's gradients into the momentum, then :meth:`pack`."""
        self.codec.accumulate(self.grads(), self.config.beta)
        return self.pack()

    def pack(self) -> torch.Tensor:
        """Write the momentum's top-k into the send buffer and remove it from the momentum.

        Returns the packed byte buffer this rank sends (``self.send``).
        """
        values_out, indices_out = self.wire.values(self.send), self.wire.indices(self.send)
        for b, (indices, values) in enumerate(self.codec.select()):
            wire_values = self.wire.bucket(values_out, b)
            wire_values.copy_(values.view(-1))
            self.wire.bucket(indices_out, b).copy_(indices.view(-1))
            # Subtract the value as it travels (bf16-rounded if so), not the exact fp32 one.
            sent = values if wire_values.dtype == torch.float32 else wire_values.view_as(values).float()
            self.codec.subtract(b, indices, sent)
        return self.send

    def decode(self, gathered: torch.Tensor) -> None:
        """Average what every rank sent and write the (signed) update into each ``p.grad``."""
        values, indices = self.wire.unpack(gathered)
        received = []
        for b, bucket in enumerate(self.codec.plan.buckets):
            world = gathered.shape[0]
            idx = self._recv_indices[b]
            val = self._recv_values[b]
            idx.copy_(self.wire.bucket(indices, b).view(world, bucket.tiles, bucket.k).transpose(0, 1))
            val.copy_(self.wire.bucket(values, b).view(world, bucket.tiles, bucket.k).transpose(0, 1))
            received.append((idx.view(bucket.tiles, -1), val.view(bucket.tiles, -1)))
        self.codec.decode(received, self.grads(), self.config.sign)

    def _sync(self, timer: StepTimer) -> None:
        self.encode()
        timer.compress()
        self.comm.all_gather(self.send, out=self.recv)
        timer.skip()
        self.decode(self.recv)
        timer.decode()
