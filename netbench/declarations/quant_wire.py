"""How a quantized outer exchange travels, and what it puts on the wire (no torch: the payload formulas read it).

gloo sums an all-reduce in the tensor's own dtype, so integers of 2, 4 or 8 bits cannot be all-reduced as they are:
a sum of N int8 values overflows int8, and values of different scales cannot be added as integers. The choices are

* widening: all-reduce the integers as int32 under one shared scale -- 4 bytes a value, no smaller than fp32;
* a ring of point-to-point sends that dequantizes, adds and quantizes again at every hop (INTELLECT-1's int8
  all-reduce), or torchft's all-to-all of quantized shards, a local fp32 sum and an all-gather of the result:
  2 (N - 1) / N of the quantized buffer per node, but collectives gloo does not run as one call;
* gather and sum locally: every rank all-gathers every rank's quantized buffer with its scales, dequantizes each
  row and sums them in fp32 in rank order, so every rank ends bit-identical.

netbench does the last: one gloo all-gather (whose ring the model prices as it prices DeMo's), each node sending
its own quantized buffer to N - 1 peers. With two nodes (two sites) that equals a ring all-reduce of the quantized
buffer; beyond two it sends (N - 1) / (2 (N - 1) / N) = N / 2 times the bytes of a reduce-scatter scheme.

Format of one node's contribution of n values at b bits with blocks of B values (``quant_block``):
``ceil(n / B)`` fp32 scales (each block's largest magnitude A), then the n codes packed ``8 / b`` to a byte
(``ceil(n b / 8)`` bytes). A code c in ``0 .. 2^b - 1`` stands for ``(c + 1/2) 2A / 2^b - A`` (uniform mid-rise
levels over [-A, A]: every code is a level, 2 bits give +-A/4 and +-3A/4).
"""

from __future__ import annotations

__all__ = ["SCALE_BYTES", "BITS", "scale_count", "code_bytes", "quantized_bytes"]

SCALE_BYTES = 4  # one fp32 scale per block
BITS = (2, 4, 8)  # the widths a value may travel in (quant_bits; 0 leaves the values unquantized)


def scale_count(numel: int, block: int) -> int:
    """Blocks (so scales) of ``numel`` values."""
    return -(-numel // block)


def code_bytes(numel: int, bits: int) -> int:
    """Bytes of ``numel`` codes of ``bits`` bits, packed."""
    return -(-numel * bits // 8)


def quantized_bytes(numel: int, bits: int, block: int) -> int:
    """Bytes one node sends for ``numel`` values: the scales, then the packed codes."""
    return scale_count(numel, block) * SCALE_BYTES + code_bytes(numel, bits)
