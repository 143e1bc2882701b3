"""A worker's side of a schedule: which compute scale is in force at a time of its run.

The orchestrator hands each worker its node's phases, ``(time_s, compute_scale)`` from the schedule's segments,
times already stretched by the run's dilation; the worker measures time from the start of its own first measured
step (the ranks start it together, after a barrier) and sets :func:`netbench.pacing.set_compute_scale` before each
step, so a straggler phase slows exactly that node's compute, encode, decode and update (as a static
``compute_scale`` does).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Phases", "scale_at"]

Phases = Sequence[tuple[float, float]]  # (seconds from the first measured step, compute scale), in time order


def scale_at(phases: Phases, t: float, before: float) -> float:
    """The compute scale in force ``t`` seconds into the measured steps; ``before`` until the first phase."""
    scale = before
    for start, value in phases:
        if start > t:
            break
        scale = value
    return scale
