"""DeMo (decoupled momentum, DCT top-k) replication with one packed all-gather per bucket."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.dct_spec import pipeline_buckets
from netbench.declarations.pipeline_policy import behind_for
from netbench.declarations.tiling import TilePlan
from netbench.replicators.backward import BackwardOverlap
from netbench.replicators.base import Replicator, StepTimer
from netbench.replicators.dct_codec import DCTCodec
from netbench.replicators.pipeline import run_pipeline
from netbench.replicators.wire import WireLayout

__all__ = ["DCTReplicator"]


def _wire_layout(plan: TilePlan, config: ReplicatorConfig, max_tile_numel: int | None = None) -> WireLayout:
    return WireLayout.for_config([b.tiles * b.k for b in plan.buckets], config, max_tile_numel or plan.max_tile_numel)


class _DCTUnit:
    """Codec, wire layout and buffers for the tensors (or row bands) of one pipeline bucket."""

    def __init__(
        self,
        shapes: Sequence[Sequence[int]],
        config: ReplicatorConfig,
        world: int,
        max_tile_numel: int,
        device: torch.device,
    ) -> None:
        self.codec = DCTCodec(shapes, config.chunk, config.topk, device=device)
        plan = self.codec.plan
        self.wire = _wire_layout(plan, config, max_tile_numel)
        self.send = torch.empty(self.wire.nbytes, dtype=torch.uint8, device=device)
        self.recv = torch.empty((world, self.wire.nbytes), dtype=torch.uint8, device=device)
        self._recv_indices = [torch.empty(b.tiles, world, b.k, dtype=torch.int64, device=device) for b in plan.buckets]
        self._recv_values = [torch.empty(b.tiles, world, b.k, device=device) for b in plan.buckets]

    def pack(self) -> torch.Tensor:
        """Write the momentum's top-k into the send buffer and remove it from the momentum."""
        values_out, indices_out = self.wire.values(self.send), self.wire.indices(self.send)
        for b, (indices, values) in enumerate(self.codec.select()):
            wire_values = self.wire.bucket(values_out, b)
            wire_values.copy_(values.view(-1))
            self.wire.bucket(indices_out, b).copy_(indices.view(-1))
            # Subtract the value as it travels (bf16-rounded if so), not the exact fp32 one.
            sent = values if wire_values.dtype == torch.float32 else wire_values.view_as(values).float()
            self.codec.subtract(b, indices, sent)
        return self.send

    def decode(self, gathered: torch.Tensor, grads: Sequence[torch.Tensor], sign: bool) -> None:
        """Average what every rank sent and write the (signed) update into ``grads``."""
        values, indices = self.wire.unpack(gathered)
        received = []
        world = gathered.shape[0]
        for b, bucket in enumerate(self.codec.plan.buckets):
            idx = self._recv_indices[b]
            val = self._recv_values[b]
            idx.copy_(self.wire.bucket(indices, b).view(world, bucket.tiles, bucket.k).transpose(0, 1))
            val.copy_(self.wire.bucket(values, b).view(world, bucket.tiles, bucket.k).transpose(0, 1))
            received.append((idx.view(bucket.tiles, -1), val.view(bucket.tiles, -1)))
        self.codec.decode(received, grads, sign)


class DCTReplicator(Replicator):
    """Each rank keeps its own momentum (in DCT space) and shares only its top-k coefficients.

    Step: ``M = beta M + T(grad)``; take the k largest |M| of every tile; pack values and
    positions into one byte buffer; subtract what was sent from ``M``; all-gather the buffers;
    average the coefficients; one inverse DCT; optionally sign; base optimizer (SGD by default,
    as DeMo). See :mod:`netbench.replicators.dct_codec` for the batching and
    :mod:`netbench.declarations.tiling` for tensors whose sides are not multiples of the chunk.

    With ``bucket_mb`` > 0 the tensors are cut into pipeline buckets of whole tile rows
    (:func:`~netbench.declarations.buckets.row_band_buckets`), each with its own codec and
    buffer, and :func:`~netbench.replicators.pipeline.run_pipeline` overlaps their encode,
    all-gather and decode. The tiles, and so every coefficient sent, are the same as unpipelined.
    """

    name = "dct"
    default_optimizer = "sgd"
    default_lr = 1e-3

    def _setup(self, config: ReplicatorConfig) -> None:
        shapes = [tuple(p.shape) for p in self.params]
        device = self.params[0].device
        world = self.comm.world_size
        max_tile = TilePlan(shapes, config.chunk, config.topk).max_tile_numel
        self.pieces = pipeline_buckets(shapes, config)
        if len(self.pieces) == 1:  # whole tensors, as unpipelined
            self.units = [_DCTUnit(shapes, config, world, max_tile, device)]
        else:
            self.units = [
                _DCTUnit([(p.rows, p.cols) for p in bucket], config, world, max_tile, device) for bucket in self.pieces
            ]
        self.comm.open_lanes(len(self.units))
        first = self.units[0]
        self.codec, self.wire, self.send, self.recv = first.codec, first.wire, first.send, first.recv

    def _bucket_grads(self, b: int) -> list[torch.Tensor]:
        """The gradients of pipeline bucket ``b``: whole tensors, or row bands (contiguous views);
        only this bucket's parameters are touched (backward may still be writing the others')."""
        if len(self.units) == 1:
            return self.grads()
        return [self.grad(p.tensor).view(-1, p.cols)[p.row0 : p.row0 + p.rows] for p in self.pieces[b]]

    def attach_backward_hooks(self) -> BackwardOverlap:
        """Launch each bucket from backward as soon as its parameters' gradients are final
        (:mod:`netbench.replicators.backward`); the step then only finishes what is left."""
        needs = (
            [[p.tensor for p in bucket] for bucket in self.pieces] if len(self.units) > 1 else [range(len(self.params))]
        )
        self._backward = BackwardOverlap(
            self.params, needs, self._encode_bucket, self._start_bucket, self._decode_bucket
        )
        return self._backward

    def _encode_bucket(self, b: int) -> None:
        unit = self.units[b]
        unit.codec.accumulate(self._bucket_grads(b), self.config.momentum_decay)
        unit.pack()

    def _start_bucket(self, b: int):
        unit = self.units[b]
        return self.comm.all_gather_async(unit.send, unit.recv)

    def _decode_bucket(self, b: int) -> None:
        self.units[b].decode(self.units[b].recv, self._bucket_grads(b), self.config.sign)

    def encode(self) -> torch.Tensor:
        """Fold this step's gradients into the momentum, then :meth:`pack` (unpipelined form)."""
        self.codec.accumulate(self.grads(), self.config.momentum_decay)
        return self.pack()

    def pack(self) -> torch.Tensor:
        """Write the momentum's top-k into the send buffer and remove it from the momentum (unpipelined form)."""
        return self.units[0].pack()

    def decode(self, gathered: torch.Tensor) -> None:
        """Average what every rank sent and write the (signed) update into each ``p.grad`` (unpipelined form)."""
        self.units[0].decode(gathered, self.grads(), self.config.sign)

    def _sync(self, timer: StepTimer) -> None:
        backward = getattr(self, "_backward", None)
        if backward is not None:
            hooked = backward.finish(timer)
            timer.book_hooked(hooked)  # codec work done inside backward still counts as codec work
            return
        if len(self.units) == 1:
            self.encode()
            timer.compress()
            self.comm.all_gather(self.send, out=self.recv)
            timer.skip()
            self.decode(self.recv)
            timer.decode()
            return
        # pipeline_policy.py: encode every bucket first where the lanes carry them at once, else READY.
        run_pipeline(
            len(self.units),
            self._encode_bucket,
            self._start_bucket,
            self._decode_bucket,
            timer,
            behind_for(self.comm.concurrent(len(self.units))),
        )
