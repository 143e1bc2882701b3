"""The mean of one flat fp32 buffer over the ranks, as an outer exchange sends it: dense or quantized.

``quant_bits`` 0: the values are cast to the wire dtype (``grad_dtype``) and all-reduced. 2, 4 or 8: the values
are summed by a ring of quantized chunks that dequantizes, adds in fp32 and quantizes again at every hop
(:mod:`netbench.replicators.ring_quantized`; :mod:`netbench.declarations.quant_wire` says why a ring). Either way
the start returns at once and the exchange travels on threads of its own (gloo's, or the ring's) until
:meth:`OuterMean.finish`, so a caller may train on meanwhile (Streaming DiLoCo's overlap) or finish at once
(DiLoCo).
"""

from __future__ import annotations

import torch

from netbench.replicators.base import WIRE_DTYPES, StepTimer
from netbench.replicators.comm import GroupComm, Pending
from netbench.replicators.ring_quantized import QuantizedRing

__all__ = ["OuterMean"]


class OuterMean:
    """Averages ``numel`` fp32 values over ``comm``'s ranks; one exchange in flight at a time."""

    def __init__(
        self, comm: GroupComm, numel: int, grad_dtype: str, bits: int, block: int, device: torch.device
    ) -> None:
        self.comm, self.numel, self.bits = comm, numel, bits
        self.mean = torch.zeros(numel, device=device)
        self._pending: Pending | None = None
        self.ring = QuantizedRing(comm, numel, bits, block, device) if bits else None
        if self.ring is None:
            self.buffer = torch.zeros(numel, dtype=WIRE_DTYPES[grad_dtype], device=device)

    def rounded(self, values: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``values`` as this rank's own encoding of them decodes (the ring's chunks quantized as their first hop
        quantizes them, or the wire dtype's cast), into ``out``: what an error feedback counts as sent. Call it
        between exchanges."""
        if self.ring is not None:
            return self.ring.rounded(values, out)
        return out.copy_(self.buffer.copy_(values))

    def start(self, values: torch.Tensor, timer: StepTimer, **tag: object) -> None:
        """Encode ``values`` (booked as encode) and start the exchange; ``tag`` labels it on the timeline."""
        if self.ring is not None:
            self.ring.start(values, timer, **tag)
            return
        if self._pending is not None:
            raise RuntimeError("an outer exchange is already in flight")
        self.buffer.copy_(values)
        timer.compress()
        self._pending = self.comm.all_reduce_mean_async(self.buffer, **tag)
        timer.skip()

    def finish(self, timer: StepTimer) -> torch.Tensor:
        """Wait for the exchange (booked as communication) and return the fp32 mean (its decode is the caller's to
        book, with what it does with the mean)."""
        if self.ring is not None:
            self.ring.finish(self.mean, timer)
            return self.mean.div_(self.comm.world_size)
        if self._pending is None:
            raise RuntimeError("no outer exchange in flight")
        self._pending.wait()
        self._pending = None
        timer.skip()
        return self.mean.copy_(self.buffer)

    def exchange(self, values: torch.Tensor, timer: StepTimer) -> torch.Tensor:
        """The mean of ``values``, waited for at once (the encode booked as encode, the exchange as communication)."""
        if self.ring is not None:
            self.start(values, timer)
            return self.finish(timer)
        self.buffer.copy_(values)
        timer.compress()
        self.comm.all_reduce_mean(self.buffer)
        timer.skip()
        return self.mean.copy_(self.buffer)
