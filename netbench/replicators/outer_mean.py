"""The mean of one flat fp32 buffer over the ranks, as an outer exchange sends it: dense or quantized.

``quant_bits`` 0: the values are cast to the wire dtype (``grad_dtype``) and all-reduced. 2, 4 or 8: each rank
quantizes its values (:mod:`netbench.replicators.quantize`), all-gathers every rank's bytes, and dequantizes and adds
the rows in rank order in fp32 (:mod:`netbench.declarations.quant_wire` says why a gather). Either way the start
returns at once and the collective travels on gloo's threads until :meth:`OuterMean.finish`, so a caller may
train on meanwhile (Streaming DiLoCo's overlap) or finish at once (DiLoCo).
"""

from __future__ import annotations

import torch

from netbench.declarations.quant_wire import quantized_bytes
from netbench.dtypes import DTYPE_BYTES
from netbench.replicators.base import WIRE_DTYPES, StepTimer
from netbench.replicators.comm import GroupComm, Pending
from netbench.replicators.quantize import Quantizer

__all__ = ["OuterMean", "outer_bytes"]


def outer_bytes(numel: int, grad_dtype: str, bits: int, block: int) -> int:
    """Bytes one node hands to the collective for ``numel`` values (the payload formulas' term)."""
    return numel * DTYPE_BYTES[grad_dtype] if bits == 0 else quantized_bytes(numel, bits, block)


class OuterMean:
    """Averages ``numel`` fp32 values over ``comm``'s ranks; one exchange in flight at a time."""

    def __init__(
        self, comm: GroupComm, numel: int, grad_dtype: str, bits: int, block: int, device: torch.device
    ) -> None:
        self.comm, self.numel, self.bits = comm, numel, bits
        self.mean = torch.zeros(numel, device=device)
        self._pending: Pending | None = None
        if bits == 0:
            self.quantizer = None
            self.buffer = torch.zeros(numel, dtype=WIRE_DTYPES[grad_dtype], device=device)
        else:
            self.quantizer = Quantizer(numel, bits, block, device)
            self.buffer = torch.zeros(self.quantizer.nbytes, dtype=torch.uint8, device=device)
            self.gathered = torch.zeros((comm.world_size, self.quantizer.nbytes), dtype=torch.uint8, device=device)
            self._row = torch.zeros(numel, device=device)

    def start(self, values: torch.Tensor, timer: StepTimer, **tag: object) -> None:
        """Encode ``values`` (booked as encode) and start the collective; ``tag`` labels it on the timeline."""
        if self._pending is not None:
            raise RuntimeError("an outer exchange is already in flight")
        if self.quantizer is None:
            self.buffer.copy_(values)
            timer.compress()
            self._pending = self.comm.all_reduce_mean_async(self.buffer, **tag)
        else:
            self.quantizer.encode(values, self.buffer)
            timer.compress()
            self._pending = self.comm.all_gather_async(self.buffer, self.gathered, **tag)
        timer.skip()

    def finish(self, timer: StepTimer) -> torch.Tensor:
        """Wait for the collective (booked as communication) and return the fp32 mean (its decode is the caller's to
        book, with what it does with the mean)."""
        if self._pending is None:
            raise RuntimeError("no outer exchange in flight")
        self._pending.wait()
        self._pending = None
        timer.skip()
        if self.quantizer is None:
            return self.mean.copy_(self.buffer)
        return self._dequantized_mean()

    def exchange(self, values: torch.Tensor, timer: StepTimer) -> torch.Tensor:
        """The mean of ``values``, with blocking collectives (the encode booked as encode, the collective as
        communication)."""
        if self.quantizer is None:
            self.buffer.copy_(values)
            timer.compress()
            self.comm.all_reduce_mean(self.buffer)
            timer.skip()
            return self.mean.copy_(self.buffer)
        self.quantizer.encode(values, self.buffer)
        timer.compress()
        self.comm.all_gather(self.buffer, self.gathered)
        timer.skip()
        return self._dequantized_mean()

    def _dequantized_mean(self) -> torch.Tensor:
        assert self.quantizer is not None
        self.mean.zero_()
        for row in self.gathered:  # rank order on every rank: the same sum everywhere
            self.mean.add_(self.quantizer.decode(row, self._row))
        return self.mean.div_(self.comm.world_size)
