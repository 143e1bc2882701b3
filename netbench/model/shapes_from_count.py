"""A shape list for a bare parameter count (``netbench plan --params 1.5e9``).

Payloads depend on shapes, not only on counts (chunked transforms need divisible sides, a rank-r
factorisation only pays when (m + n) r < m n), so a count is turned into square matrices with
a side that is a multiple of 64 -- what real layers look like -- plus one remainder matrix and a
vector, hitting the count exactly.
"""

from __future__ import annotations

import math

from netbench.shapes import ParamShape

__all__ = ["synthetic_shapes", "side_for"]

MIN_SIDE, MAX_SIDE, ALIGN = 64, 8192, 64
MATRICES_PER_SIDE = 64  # about this many d x d matrices: a mid-sized transformer's count


def side_for(params: int) -> int:
    """Matrix side d: about sqrt(params / 64), rounded to a multiple of 64 within [64, 8192]."""
    d = round(math.sqrt(params / MATRICES_PER_SIDE) / ALIGN) * ALIGN
    return int(min(MAX_SIDE, max(MIN_SIDE, d)))


def synthetic_shapes(params: int) -> list[ParamShape]:
    """``params`` scalars as d x d matrices, one (rows, d) remainder and a remainder vector."""
    if params < 1:
        raise ValueError(f"parameter count must be at least 1, got {params}")
    d = side_for(params)
    full, rest = divmod(params, d * d)
    shapes = [ParamShape(f"w{i}", (d, d)) for i in range(full)]
    rows, tail = divmod(rest, d)
    if rows:
        shapes.append(ParamShape("w_rest", (rows, d)))
    if tail:
        shapes.append(ParamShape("b_rest", (tail,)))
    return shapes
