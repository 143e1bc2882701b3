"""DeepSpeed's ``compressed_allreduce`` (``runtime/comm/nccl.py``): the error-compensated 1-bit mean of a buffer every
rank holds, shared by 1-bit Adam (``onebit``) and 0/1 Adam (``zeroone``).

1. worker: add the worker error to the buffer (padded to n', :func:`~netbench.declarations.onebit_spec.padded`),
   scale ``s_w = ||x|| / sqrt(n')``, error ``x - s_w sign(x)`` (sign 0 counts as +1), pack the signs 8 a byte;
2. all-to-all of the packed signs: rank j receives every worker's chunk j; all-gather of the worker scales;
3. server (each rank for its chunk): the mean of the workers' ``s_w sign``, plus the server error, scaled and
   signed the same way (scale ``||x|| / sqrt(n'/N)``), its error kept, its signs packed;
4. all-gather of the servers' packed signs and of their scales; every rank unpacks the same bytes.

The bytes each call hands to gloo are :func:`~netbench.declarations.onebit_spec.compressed_allreduce`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from netbench.declarations.onebit_spec import padded
from netbench.replicators.base import StepTimer
from netbench.replicators.comm import GroupComm

__all__ = ["CompressedAllReduce", "pack_signs", "unpack_signs"]

_BIT_WEIGHTS = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8)  # numpy/cupy packbits: big-endian


def pack_signs(values: torch.Tensor) -> torch.Tensor:
    """One bit a value (1: ``values >= 0``), 8 a byte, first value in the high bit; ``values``' length a multiple
    of 8."""
    bits = (values >= 0).view(-1, 8).to(torch.uint8)
    return bits.mul_(_BIT_WEIGHTS.to(values.device)).sum(dim=1, dtype=torch.uint8)


def unpack_signs(packed: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """+1 or -1 per packed bit into ``out`` (8 values a byte)."""
    bits = packed.unsqueeze(-1).bitwise_and(_BIT_WEIGHTS.to(packed.device)).ne_(0)
    return out.copy_(bits.view(out.shape)).mul_(2.0).sub_(1.0)


class CompressedAllReduce:
    """The compressed mean of an ``numel``-long fp32 buffer over ``comm``'s group, with its worker and server errors
    (kept from call to call: what the signs missed goes into the next call)."""

    def __init__(self, comm: GroupComm, numel: int, device: torch.device) -> None:
        world = comm.world_size
        self.comm, self.numel = comm, numel
        full = padded(numel, world)
        chunk = full // world
        self.buffer = torch.zeros(full, device=device)  # the padded values, compensated
        self.worker_error = torch.zeros(full, device=device)
        self.server_error = torch.zeros(chunk, device=device)
        self.received = torch.zeros(world, chunk // 8, dtype=torch.uint8, device=device)  # workers' signs of my chunk
        self.gathered = torch.zeros(world, chunk // 8, dtype=torch.uint8, device=device)  # every server's signs
        self.scales = torch.zeros(world, 1, device=device)
        self.signs = torch.zeros(world, chunk, device=device)

    def reset_errors(self) -> None:
        """Forget both errors (0/1 Adam's switch from compressing gradients to compressing accumulated updates)."""
        self.worker_error.zero_()
        self.server_error.zero_()

    def mean(self, values: torch.Tensor, timer: StepTimer) -> None:
        """Replace ``values`` by the compressed mean of every rank's (the same on every rank)."""
        world = self.comm.world_size
        x = self.buffer
        x[: self.numel].copy_(values)
        x[self.numel :].zero_()
        x.add_(self.worker_error)
        self._send(x, self.worker_error, lambda signs: self.comm.all_to_all(signs, self.received), timer)
        unpack_signs(self.received, self.signs)
        server = self.signs.mul_(self.scales / world).sum(dim=0)
        server.add_(self.server_error)
        self._send(server, self.server_error, lambda signs: self.comm.all_gather(signs, self.gathered), timer)
        unpack_signs(self.gathered, self.signs)
        values.copy_(self.signs.mul_(self.scales).view(-1)[: self.numel])

    def _send(
        self, values: torch.Tensor, error: torch.Tensor, send_signs: Callable[[torch.Tensor], object], timer: StepTimer
    ) -> None:
        """Compress ``values`` (``error`` keeps what the signs miss; booked as encode), hand its packed signs to
        ``send_signs`` and all-gather its scale into ``self.scales`` (booked as communication)."""
        scale = _scale_and_error(values, error)
        packed = pack_signs(values)
        timer.compress()
        send_signs(packed)
        self.comm.all_gather(scale, self.scales)
        timer.skip()


def _scale_and_error(values: torch.Tensor, error: torch.Tensor) -> torch.Tensor:
    """DeepSpeed's scale ``||x|| / sqrt(len)`` (a 1-element tensor); ``error`` becomes ``x - scale sign(x)``."""
    scale = (values.norm() / math.sqrt(values.numel())).reshape(1)
    torch.where(values >= 0, values - scale, values + scale, out=error)
    return scale
