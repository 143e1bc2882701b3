"""Cut a step's payload into pipeline buckets (pure: shapes and settings only).

A pipelined replicator sends its step in several collectives so that encoding bucket i+1 and
decoding bucket i-1 overlap with bucket i on the wire. Both the replicators and their payload
formulas call these functions, so the collectives the model counts are the ones the workers make.
Cuts are contiguous and as even as the unit allows: slots of a flat buffer (a dense or subset all-reduce) or
tile rows of one tensor (DeMo's chunks), so a tensor may be split across buckets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from netbench.declarations.tiling import matrix_shape

__all__ = [
    "bucket_bytes",
    "slot_ranges",
    "item_ranges",
    "Piece",
    "row_band_buckets",
    "lanes_for",
    "travel_at_once",
    "COLLECTIVES_PER_LANE",
    "MAX_LANES",
]

COLLECTIVES_PER_LANE = 2  # ProcessGroupGloo's worker threads: collectives of one group that run at once
MAX_LANES = 8  # process groups a pipeline opens at most (each holds two threads and a socket per peer)


def lanes_for(buckets: int) -> int:
    """Process groups a pipeline of ``buckets`` collectives needs so that none queues behind another
    (see :meth:`netbench.replicators.comm.GroupComm.open_lanes`)."""
    return max(1, min(MAX_LANES, -(-buckets // COLLECTIVES_PER_LANE)))


def travel_at_once(calls: int, lanes: int) -> bool:
    """Whether ``calls`` async collectives started together all run at once on ``lanes`` process groups
    (the workers pick their schedule by it and the model its form, so both agree)."""
    return lanes * COLLECTIVES_PER_LANE >= calls


def bucket_bytes(bucket_mb: float) -> int:
    """Bytes per bucket from the setting (megabytes of 1e6 B); 0 means one bucket for the whole step."""
    return int(round(bucket_mb * 1e6))


def slot_ranges(slots: int, itemsize: int, target_bytes: int) -> list[tuple[int, int]]:
    """Contiguous, near-equal ``(start, stop)`` slot ranges of at most about ``target_bytes`` each.

    ``target_bytes`` 0 (or a payload that fits) gives the single range ``(0, slots)``.
    """
    total = slots * itemsize
    count = 1 if target_bytes <= 0 or total <= target_bytes else min(slots, math.ceil(total / target_bytes))
    edges = [i * slots // count for i in range(count + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:])]


def item_ranges(item_bytes: Sequence[int], target_bytes: int) -> list[tuple[int, int]]:
    """Contiguous ``(start, stop)`` ranges of whole items (Dion's per-matrix factors: never split),
    cut where the running bytes cross multiples of an even share of the total (by each item's midpoint).

    ``target_bytes`` 0 (or a total that fits) gives the single range over every item.
    """
    total = sum(item_bytes)
    count = 1 if target_bytes <= 0 or total <= target_bytes else math.ceil(total / target_bytes)
    owner, done = [], 0
    for nbytes in item_bytes:
        owner.append(min(count - 1, (2 * done + nbytes) * count // (2 * total)) if total else 0)
        done += nbytes
    ranges: list[tuple[int, int]] = []
    for i, b in enumerate(owner):
        if ranges and owner[ranges[-1][0]] == b:
            ranges[-1] = (ranges[-1][0], i + 1)
        else:
            ranges.append((i, i + 1))
    return ranges


@dataclass(frozen=True)
class Piece:
    """Rows ``row0 .. row0 + rows`` of one tensor's matrix view (contiguous in memory)."""

    tensor: int
    row0: int
    rows: int
    cols: int


def _band_bytes(rows: int, cols: int, chunk: int, topk: int, coefficient_bytes: int) -> int:
    """Wire bytes of a band of ``rows`` rows (one tile row: rows <= chunk) and ``cols`` columns."""
    full, edge = divmod(cols, chunk)
    coefficients = full * min(topk, rows * chunk) + (min(topk, rows * edge) if edge else 0)
    return coefficients * coefficient_bytes


def row_band_buckets(
    shapes: Sequence[Sequence[int]],
    chunk: int,
    topk: int,
    coefficient_bytes: int,
    target_bytes: int,
    reverse: bool = False,
) -> list[list[Piece]]:
    """DCT pipeline buckets: runs of tile rows (``chunk`` rows of a matrix view, the edge band
    shorter), cut where the running wire bytes cross multiples of an even share of the total.

    Every band is whole, so a bucket's tiles are exactly the full tiling's tiles of those rows and
    the coefficients of all buckets add up to the unpipelined step's. ``reverse`` walks the tensors
    last to first (rows still top to bottom), the order backward makes their gradients in, so
    bucket 0 holds the last parameters (see :mod:`netbench.replicators.backward`).
    """
    units: list[tuple[int, int, int, int, int]] = []  # (tensor, row0, rows, cols, bytes)
    order = reversed(range(len(shapes))) if reverse else range(len(shapes))
    for t in order:
        rows, cols = matrix_shape(shapes[t])
        for r0 in range(0, rows, chunk):
            h = min(chunk, rows - r0)
            units.append((t, r0, h, cols, _band_bytes(h, cols, chunk, topk, coefficient_bytes)))
    total = sum(u[4] for u in units)
    count = 1 if target_bytes <= 0 or total <= target_bytes else math.ceil(total / target_bytes)
    buckets: list[list[Piece]] = [[] for _ in range(count)]
    done = 0
    for t, r0, h, cols, nbytes in units:
        b = min(count - 1, (2 * done + nbytes) * count // (2 * total)) if total else 0  # by the band's midpoint
        pieces = buckets[b]
        if pieces and pieces[-1].tensor == t and pieces[-1].row0 + pieces[-1].rows == r0:
            pieces[-1] = Piece(t, pieces[-1].row0, pieces[-1].rows + h, cols)
        else:
            pieces.append(Piece(t, r0, h, cols))
        done += nbytes
    return [b for b in buckets if b]
