"""How a quantized exchange travels, and what it puts on the wire (no torch: the payload formulas read it).

gloo sums an all-reduce in the tensor's own dtype, so integers of 2, 4 or 8 bits cannot be all-reduced as they are:
a sum of N int8 values overflows int8, and values of different scales cannot be added as integers. The choices are

* widening: all-reduce the integers as int32 under one shared scale -- 4 bytes a value, no smaller than fp32;
* a ring of point-to-point sends that dequantizes, adds in fp32 and quantizes again at every hop of a
  reduce-scatter, then forwards each owner's once-quantized chunk unchanged around an all-gather (INTELLECT-1's
  int8 all-reduce, pccl's ``pipelineRingReduce``): 2 (N - 1) / N of the quantized buffer per node, whatever N;
* gather and sum locally: every rank all-gathers every rank's quantized buffer with its scales, dequantizes each
  row and sums them in fp32 in rank order: (N - 1) quantized buffers per node, N / 2 times the ring's.

A mean (the outer syncs of diloco, streaming and mtdao) takes the ring
(:mod:`netbench.replicators.ring_quantized`). It cuts the n values into N chunks (:func:`ring_chunks`), each with
its own block grid, so the buffer it hands to the ring is :func:`ring_quantized_bytes`, the sum of the chunks'
quantized sizes, and the model prices it as an all-reduce of that buffer (same hops, same bytes per hop). A
selection whose positions differ per rank (SparseLoCo's top-k) cannot be summed in place and keeps the gather.

Format of one contribution of n values at b bits with blocks of B values (``quant_block``):
``ceil(n / B)`` fp32 scales (each block's largest magnitude A), then the n codes packed ``8 / b`` to a byte
(``ceil(n b / 8)`` bytes). A code c in ``0 .. 2^b - 1`` stands for ``(c + 1/2) 2A / 2^b - A`` (uniform mid-rise
levels over [-A, A]: every code is a level, 2 bits give +-A/4 and +-3A/4).
"""

from __future__ import annotations

__all__ = [
    "SCALE_BYTES",
    "BITS",
    "scale_count",
    "code_bytes",
    "quantized_bytes",
    "ring_chunks",
    "ring_hop_share",
    "ring_quantized_bytes",
]

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


def ring_chunks(numel: int, world_size: int) -> list[int]:
    """Sizes of the ``world_size`` chunks a ring cuts ``numel`` values into: chunk c holds values
    ``floor(numel c / N)`` up to ``floor(numel (c + 1) / N)``, so the sizes differ by at most one."""
    bounds = [numel * c // world_size for c in range(world_size + 1)]
    return [hi - lo for lo, hi in zip(bounds, bounds[1:])]


def ring_hop_share(world_size: int) -> float:
    """The share of the buffer each node decodes, adds and encodes inside a quantized ring, in series with its hops:
    one chunk of N at each of the N - 1 reduce-scatter hops (the owner's last encode and the ring's first are the
    step's own encode)."""
    return (world_size - 1) / world_size if world_size > 1 else 0.0


def ring_quantized_bytes(numel: int, bits: int, block: int, world_size: int) -> int:
    """Bytes of the buffer a quantized ring all-reduce hands over: every chunk quantized on its own block grid.

    Rank r sends every chunk but one in the reduce-scatter and every chunk but another in the all-gather, so over
    the ranks each node sends ``2 (N - 1) / N`` of this on average, as a ring all-reduce of a buffer of this size.
    """
    world_size = max(1, world_size)
    small, larger = divmod(numel, world_size)  # the chunks differ by at most one value: ``larger`` hold one more
    return (world_size - larger) * quantized_bytes(small, bits, block) + larger * quantized_bytes(
        small + 1, bits, block
    )
