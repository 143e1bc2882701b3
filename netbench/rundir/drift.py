"""How far the replicas drift apart, from the sketches the nodes record at each sync (steps.csv's ``replica_sketch``).

A replicator whose replicas differ after a sync (gossip: each node averages with one partner) has every node record a
fixed random projection of its parameters, the same projection everywhere, in its own step record: nothing extra
crosses the emulated links. The run summary compares the nodes' sketches of each sync step afterwards: the drift of a
sync is the mean distance between two nodes' sketches over the mean length of one, which the projection keeps on
average (a relative distance between replicas: 0 when they agree, 1 when they are as far apart as they are long).
Standard library only: the workers write with it and the orchestrator reads with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import combinations
from statistics import median
from typing import Any

from netbench.rundir.steps_schema import numbers_of, numbers_text

__all__ = ["sketch_text", "sketch_values", "drift", "drift_figures"]


def sketch_text(values: Iterable[float]) -> str | None:
    """A sketch as steps.csv holds it (None for none: a step that did not sync)."""
    return numbers_text(values)


def sketch_values(text: Any) -> tuple[float, ...]:
    """The numbers of a ``replica_sketch`` cell (none for an empty cell, which pandas reads as nan)."""
    return numbers_of(text)


def drift(sketches: list[tuple[float, ...]]) -> float | None:
    """Mean pairwise distance between the sketches over their mean length; None for fewer than two or zero length."""
    if len(sketches) < 2:
        return None
    length = sum(math.hypot(*s) for s in sketches) / len(sketches)
    if length <= 0:
        return None
    apart = [math.dist(a, b) for a, b in combinations(sketches, 2)]
    return sum(apart) / len(apart) / length


def drift_figures(steps: Iterable[int], cells: Iterable[Any]) -> dict[str, float]:
    """``replica_drift`` (the median over the sync steps) and ``replica_drift_last`` (the last sync's), from each row's
    step and sketch cell; empty where no step has sketches from two nodes."""
    by_step: dict[int, list[tuple[float, ...]]] = {}
    for step, cell in zip(steps, cells):
        values = sketch_values(cell)
        if values:
            by_step.setdefault(int(step), []).append(values)
    per_sync = [(step, drift(sketches)) for step, sketches in sorted(by_step.items())]
    known = [d for _, d in per_sync if d is not None]
    if not known:
        return {}
    return {"replica_drift": median(known), "replica_drift_last": known[-1]}
