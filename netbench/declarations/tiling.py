"""Cut every tensor into DCT tiles and group equal tile shapes into buckets (pure: shapes only).

Both the DCT codec and the payload formula use this plan, so the number of coefficients the
model predicts is the number the codec sends.

Tiling rule: every tensor is viewed as a matrix (rows = first dimension, columns = the product of
the rest; a 1-D tensor is one row, a scalar a 1x1 matrix). Each axis of length n is cut into
``n // s`` full chunks of length s plus, when s does not divide n, ONE edge chunk of length
``n % s`` that gets its own, smaller DCT basis. Each tile sends ``min(k, tile size)``
coefficients. Compared with DeMo's "largest divisor <= s" rule this never degenerates: DeMo
turns a prime length such as 1031 into 1-long chunks (sending min(k, 1 x s) = half of a 64-wide
row), while here it costs one extra strip of tiles. On lengths divisible by s both rules agree.
1-D tensors are therefore cut into s-long chunks, as in DeMo.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from netbench.shapes import ParamShape

__all__ = ["Region", "Bucket", "TilePlan", "matrix_shape"]


def matrix_shape(shape: Sequence[int]) -> tuple[int, int]:
    """The 2-D view a tensor is tiled in: (first dim, everything else); 1-D -> (1, n)."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, int(shape[0])
    return int(shape[0]), math.prod(int(d) for d in shape[1:])


def _segments(n: int, s: int) -> list[tuple[int, int, int]]:
    """(start, length, tile size) runs covering 0..n: full s-tiles, then one edge tile."""
    full = (n // s) * s
    runs = [(0, full, s)] if full else []
    if n - full:
        runs.append((full, n - full, n - full))
    return runs


@dataclass(frozen=True)
class Region:
    """A rectangle of one tensor's matrix view tiled uniformly with h x w tiles."""

    tensor: int
    row0: int
    rows: int
    col0: int
    cols: int
    h: int
    w: int
    bucket: int
    tile0: int  # index of this region's first tile inside its bucket

    @property
    def row_tiles(self) -> int:
        return self.rows // self.h

    @property
    def col_tiles(self) -> int:
        return self.cols // self.w

    @property
    def tiles(self) -> int:
        return self.row_tiles * self.col_tiles


@dataclass(frozen=True)
class Bucket:
    """All tiles of one shape (h, w), from every tensor: one batched transform and one top-k."""

    h: int
    w: int
    tiles: int
    k: int  # coefficients sent per tile

    @property
    def tile_numel(self) -> int:
        return self.h * self.w


class TilePlan:
    """Regions of every tensor and the buckets they fill, in a deterministic order."""

    def __init__(self, shapes: Sequence[ParamShape] | Sequence[Sequence[int]], chunk: int, topk: int) -> None:
        dims = [s.shape if isinstance(s, ParamShape) else tuple(s) for s in shapes]
        self.matrix_shapes = [matrix_shape(d) for d in dims]
        keys: dict[tuple[int, int], int] = {}
        counts: list[int] = []
        regions: list[Region] = []
        for t, (rows, cols) in enumerate(self.matrix_shapes):
            for r0, nr, h in _segments(rows, chunk):
                for c0, nc, w in _segments(cols, chunk):
                    b = keys.setdefault((h, w), len(keys))
                    if b == len(counts):
                        counts.append(0)
                    tiles = (nr // h) * (nc // w)
                    regions.append(Region(t, r0, nr, c0, nc, h, w, b, counts[b]))
                    counts[b] += tiles
        self.regions = regions
        self.buckets = [Bucket(h, w, counts[b], min(topk, h * w)) for (h, w), b in keys.items()]

    @property
    def coefficients(self) -> int:
        """Coefficients one rank sends per step."""
        return sum(b.tiles * b.k for b in self.buckets)

    @property
    def max_tile_numel(self) -> int:
        return max((b.tile_numel for b in self.buckets), default=1)
