"""Block-scaled integer quantization of fp32 values into one byte buffer, and back (the format of
:mod:`netbench.declarations.quant_wire`)."""

from __future__ import annotations

import torch

from netbench.declarations.quant_wire import SCALE_BYTES, code_bytes, quantized_bytes, scale_count

__all__ = ["Quantizer"]


class Quantizer:
    """Quantizes ``numel`` fp32 values at ``bits`` bits, one scale per ``block`` values, into a reused buffer."""

    def __init__(self, numel: int, bits: int, block: int, device: torch.device | str = "cpu") -> None:
        if bits not in (2, 4, 8):
            raise ValueError(f"quantization to {bits} bits: choose 2, 4 or 8")
        self.numel, self.bits, self.block = numel, bits, block
        self.blocks = scale_count(numel, block)
        self.per_byte = 8 // bits
        self.levels = 1 << bits
        self.nbytes = quantized_bytes(numel, bits, block)
        self._scales_end = self.blocks * SCALE_BYTES
        self._padded = torch.zeros(self.blocks * block, device=device)
        self._packed_codes = -(-numel // self.per_byte) * self.per_byte
        self._shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=device)

    def encode(self, values: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Write the quantized ``values`` (fp32, ``numel``) into ``out`` (uint8, ``nbytes``); returns ``out``."""
        padded = self._padded
        padded[: self.numel].copy_(values)
        padded[self.numel :].zero_()  # a decode leaves levels in the padding; they must not enter the last scale
        blocks = padded.view(self.blocks, self.block)
        scale = blocks.abs().amax(dim=1)
        out[: self._scales_end].copy_(scale.view(torch.uint8))  # bytewise: ``out`` may start anywhere in a buffer
        step = (2.0 / self.levels) * scale.clamp_min(torch.finfo(torch.float32).tiny)
        codes = blocks.add(scale.unsqueeze(1)).div_(step.unsqueeze(1)).floor_().clamp_(0, self.levels - 1)
        codes = codes.view(-1)[: self._packed_codes].to(torch.uint8)
        if self._packed_codes > self.numel:  # the codes past the values (padding) are zero, never read
            codes[self.numel :] = 0
        if self.per_byte > 1:
            codes = (codes.view(-1, self.per_byte) << self._shifts).sum(dim=1, dtype=torch.uint8)
        out[self._scales_end :].copy_(codes)
        return out

    def decode(self, row: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The fp32 values (``numel``) one node's quantized ``row`` (uint8, ``nbytes``) stands for, into ``out``."""
        scale = row[: self._scales_end].clone().view(torch.float32)  # a byte slice need not be aligned for fp32
        packed = row[self._scales_end : self._scales_end + code_bytes(self.numel, self.bits)]
        if self.per_byte > 1:
            codes = ((packed.unsqueeze(1) >> self._shifts) & (self.levels - 1)).view(-1)
        else:
            codes = packed
        padded = self._padded
        padded.zero_()
        padded[: self.numel].copy_(codes[: self.numel])
        blocks = padded.view(self.blocks, self.block)
        step = (2.0 / self.levels) * scale
        blocks.add_(0.5).mul_(step.unsqueeze(1)).sub_(scale.unsqueeze(1))
        return out.copy_(padded[: self.numel])
