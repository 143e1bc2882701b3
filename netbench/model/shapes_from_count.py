"""A shape list for a bare parameter count (``netbench plan --params 1.5e9``).

Payloads depend on shapes, not only on counts (chunked transforms need divisible sides, a rank-r
factorisation only pays when (m + n) r < m n), so a count is turned into square matrices with
a side that is a multiple of 64 -- what real layers look like -- plus one remainder matrix and a
vector, hitting the count exactly. Given a layer count (``--layers``), the count is split evenly over that many
layers named ``layers.N.`` (what a layer schedule and Streaming DiLoCo's fragments read).
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


def _matrices(count: int, d: int, prefix: str) -> list[ParamShape]:
    """``count`` scalars as d x d matrices, one (rows, d) remainder and a remainder vector."""
    full, rest = divmod(count, d * d)
    shapes = [ParamShape(f"{prefix}w{i}", (d, d)) for i in range(full)]
    rows, tail = divmod(rest, d)
    if rows:
        shapes.append(ParamShape(f"{prefix}w_rest", (rows, d)))
    if tail:
        shapes.append(ParamShape(f"{prefix}b_rest", (tail,)))
    return shapes


def synthetic_shapes(params: int, layers: int | None = None) -> list[ParamShape]:
    """``params`` scalars as d x d matrices and remainders; with ``layers``, split evenly over that many layers
    (``layers.0.w0``, ...), each at least one scalar."""
    if params < 1:
        raise ValueError(f"parameter count must be at least 1, got {params}")
    d = side_for(params)
    if not layers:
        return _matrices(params, d, "")
    if not 1 <= layers <= params:
        raise ValueError(f"layers must be between 1 and the parameter count {params}, got {layers}")
    base, extra = divmod(params, layers)
    return [s for i in range(layers) for s in _matrices(base + (i < extra), d, f"layers.{i}.")]
