"""Which slice of every parameter one accelerator of a G-accelerator node owns (torch-free: the model reads it).

A node shards every parameter along its first dimension (as FSDP2 does; the dimension padded to a multiple
of G), so each accelerator owns a ``ceil(d0 / G)``-row slice and replicates only that across nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from netbench.shapes import ParamShape

__all__ = ["slice_rows", "shard_shapes", "unit_of", "shard_units"]


def slice_rows(shape: Sequence[int], g: int) -> int:
    """Rows of one accelerator's slice: the first dimension padded to a multiple of G, divided by G."""
    d0 = shape[0] if shape else 1
    return -(-d0 // g)


def shard_shapes(shapes: Sequence[ParamShape], g: int) -> list[ParamShape]:
    """The slice shapes one accelerator replicates (what its replicator, and the model, see)."""
    return [ParamShape(s.name, (slice_rows(s.shape, g), *tuple(s.shape)[1:]) if s.shape else (1,)) for s in shapes]


def unit_of(name: str) -> str:
    """The layer FSDP gathers a parameter with, from its name: the module one level below the root, containers
    (a ``Sequential``'s or ``ModuleList``'s numbered children) opened: ``0.weight`` -> ``0``, ``blocks.3.fc.weight``
    -> ``blocks.3``, ``head.weight`` -> ``head``; the root's own parameters -> ``""``."""
    parts = name.split(".")
    for i in range(len(parts) - 1):
        if not parts[i + 1].isdigit():
            return ".".join(parts[: i + 1])
    return ""


def shard_units(shapes: Sequence[ParamShape]) -> dict[str, list[ParamShape]]:
    """The model's parameters by the layer that gathers them (:func:`unit_of`), layers in the order they first
    appear."""
    units: dict[str, list[ParamShape]] = {}
    for s in shapes:
        units.setdefault(unit_of(s.name), []).append(s)
    return units
