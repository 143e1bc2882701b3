"""The sum of one flat fp32 buffer over the ranks, through a ring of point-to-point sends carrying quantized chunks.

INTELLECT-1's int8 all-reduce (PrimeIntellect-ai/prime, ``ring_allreduce``) and pccl's ``pipelineRingReduce`` cut
the buffer into N chunks and run a ring all-reduce whose hops carry block-scaled integers
(:mod:`netbench.declarations.quant_wire`), so each node sends ``2 (N - 1) / N`` of the quantized buffer:

1. **reduce-scatter**, N - 1 hops: at hop s rank r quantizes its fp32 partial sum of chunk ``r - s``, sends it to
   rank r + 1, receives chunk ``r - s - 1`` from rank r - 1, dequantizes it and adds it in fp32. Rank r ends with
   the whole sum of chunk ``r + 1``, which has been quantized once per hop, each time as a partial sum.
2. the owner quantizes its chunk's sum once more (pccl: "we only quantize the chunk we own");
3. **all-gather**, N - 1 hops: every rank forwards the owner's bytes unchanged, never quantizing them again;
4. every rank, the owner included, decodes every chunk from the same bytes, so all ranks end bit-identical.

Each hop's receive is posted before the hop before it is waited on: gloo sends only after the receiver's
ready-to-receive notification has arrived, so a receive posted late costs a hop two one-way delays instead of one.
The schedule runs on a thread of its own (:meth:`GroupComm.point_to_point_async`) so a caller can train on while it
travels (Streaming DiLoCo's overlap); the codec work of the hops is on its critical path, as in the references.

Error: a chunk's sum is quantized N times along its path (N - 1 partial sums and the owner's), so it is within the
sum of those quantizations' half-levels of the exact sum, a little more than the gather's bound of one half-level
per rank (:func:`error_bound`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from netbench.declarations.quant_wire import ring_chunks
from netbench.replicators.base import StepTimer
from netbench.replicators.comm import GroupComm, Pending, needs_host_copy
from netbench.replicators.quantize import Quantizer

__all__ = ["QuantizedRing", "error_bound"]

TAG = 50  # the point-to-point tag of a ring's messages, kept apart from other sends on the group


class QuantizedRing:
    """Sums ``numel`` fp32 values over ``comm``'s ranks as a ring of quantized chunks; one sum in flight at a time."""

    def __init__(self, comm: GroupComm, numel: int, bits: int, block: int, device: torch.device) -> None:
        self.comm, self.numel, self.device = comm, numel, device
        n, r = comm.world_size, comm.rank
        sizes = ring_chunks(numel, n)
        self.starts = [sum(sizes[:c]) for c in range(n)]
        self.quantizers = [Quantizer(size, bits, block, device) for size in sizes]
        offsets = [0]
        for q in self.quantizers:
            offsets.append(offsets[-1] + q.nbytes)
        self.offsets, self.nbytes = offsets, offsets[-1]
        wire = torch.device("cpu") if needs_host_copy(comm.backend, device.type) else device
        self.outgoing = torch.zeros(self.nbytes, dtype=torch.uint8, device=wire)  # reduce-scatter sends
        self.incoming = torch.zeros(self.nbytes, dtype=torch.uint8, device=wire)  # reduce-scatter receives
        self.result = torch.zeros(self.nbytes, dtype=torch.uint8, device=wire)  # every owner's quantized sum
        self.partial = torch.zeros(numel, device=device)  # this rank's fp32 partial sums
        self._decoded = torch.zeros(max(sizes, default=0), device=device)
        self.next_rank, self.prev_rank = comm.peer((r + 1) % n), comm.peer((r - 1) % n)
        self._pending: Pending | None = None

    def chunk(self, values: torch.Tensor, c: int) -> torch.Tensor:
        """Chunk ``c`` of a buffer of ``numel`` values."""
        return values[self.starts[c] : self.starts[c] + self.quantizers[c].numel]

    def slot(self, wire: torch.Tensor, c: int) -> torch.Tensor:
        """Chunk ``c``'s quantized bytes within one of the wire buffers."""
        return wire[self.offsets[c] : self.offsets[c + 1]]

    def rounded(self, values: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``values`` quantized and decoded chunk by chunk on the ring's grids, into ``out``; between sums only (the
        outgoing buffer is its scratch)."""
        if self._pending is not None:
            raise RuntimeError("a ring all-reduce is in flight")
        for c, q in enumerate(self.quantizers):
            wire = q.encode(self.chunk(values, c), self.slot(self.outgoing, c))
            q.decode(wire.to(self.device), self.chunk(out, c))
        return out

    def start(self, values: torch.Tensor, timer: StepTimer, **tag: object) -> None:
        """Quantize this rank's first chunk (booked as encode) and start the ring; ``tag`` labels it on the timeline."""
        if self._pending is not None:
            raise RuntimeError("a ring all-reduce is already in flight")
        self.partial.copy_(values)
        first = self.comm.rank
        self.quantizers[first].encode(self.chunk(self.partial, first), self.slot(self.outgoing, first))
        timer.compress()
        self._pending = self.comm.point_to_point_async(self._run, self.result, "ring_all_reduce", **tag)
        timer.skip()

    def finish(self, out: torch.Tensor, timer: StepTimer) -> torch.Tensor:
        """Wait for the ring (booked as communication) and decode the sum into ``out`` (the caller books the decode
        with what it does with the sum)."""
        if self._pending is None:
            raise RuntimeError("no ring all-reduce in flight")
        self._pending.wait()
        self._pending = None
        timer.skip()
        for c, q in enumerate(self.quantizers):  # every rank decodes the same bytes: the same sum everywhere
            q.decode(self.slot(self.result, c).to(self.device), self.chunk(out, c))
        return out

    def _run(self) -> None:
        """The 2 (N - 1) hops; each receive posted one hop ahead of the wait on the one before it."""
        n, r = self.comm.world_size, self.comm.rank
        own = (r + 1) % n
        receives = [(self.incoming, (r - s - 1) % n) for s in range(n - 1)]
        receives += [(self.result, (own - s - 1) % n) for s in range(n - 1)]
        posted, sent = [], []
        if receives:
            posted.append(self._receive(*receives[0]))
        for hop in range(2 * (n - 1)):
            if hop < n - 1:
                c = (r - hop) % n
                if hop > 0:  # the first chunk was quantized by start()
                    self.quantizers[c].encode(self.chunk(self.partial, c), self.slot(self.outgoing, c))
                sent.append(self._send(self.slot(self.outgoing, c)))
            else:
                if hop == n - 1:  # the owner quantizes its whole sum once; the all-gather forwards it as it is
                    self.quantizers[own].encode(self.chunk(self.partial, own), self.slot(self.result, own))
                sent.append(self._send(self.slot(self.result, (own - (hop - (n - 1))) % n)))
            if hop + 1 < len(receives):
                posted.append(self._receive(*receives[hop + 1]))
            posted[hop].wait()
            if hop < n - 1:
                c = receives[hop][1]
                q = self.quantizers[c]
                decoded = q.decode(self.slot(self.incoming, c).to(self.device), self._decoded[: q.numel])
                self.chunk(self.partial, c).add_(decoded)
        if n == 1:
            self.quantizers[own].encode(self.partial, self.slot(self.result, own))
        for work in sent:
            work.wait()

    def _send(self, wire: torch.Tensor):
        return dist.isend(wire, self.next_rank, group=self.comm.group, tag=TAG)

    def _receive(self, wire: torch.Tensor, c: int):
        return dist.irecv(self.slot(wire, c), self.prev_rank, group=self.comm.group, tag=TAG)


def error_bound(absmax: torch.Tensor, bits: int) -> torch.Tensor:
    """Largest error of a ring's sum of one block, from each rank's largest magnitude in it (``absmax``, in ring order
    from the chunk's first rank): the partial sum over k ranks is quantized with a scale of at most
    ``S_k + e_{k-1}`` (``S_k`` the absmaxes' sum so far, ``e_{k-1}`` the error so far), half a level of which is
    ``(S_k + e_{k-1}) 2^-b``; N quantizations in all, the owner's included."""
    error = torch.zeros_like(absmax[0])
    for bound in torch.cumsum(absmax, dim=0):
        error = error + (bound + error) * 2.0**-bits
    return error
