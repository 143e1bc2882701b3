"""Time dilation's CPU side (DieCast, NSDI'08): a worker's CPU phases run k times slower.

Under dilation k the emulator slows every link and delay by k and divides every measured
duration by k. The node's own CPU work (encode, decode, the optimizer's update, a real model's
forward and backward) must slow alike, or an overlapped pipeline would see a CPU k times faster
than the network beside it, and N nodes sharing C < N cores would still contend for them. So each
CPU phase is padded to k times the CPU time it took (``time.thread_time``: the calling thread;
workers run torch with one thread unless ``--threads`` says otherwise): a node then asks for 1/k
of a core per second, and its phase, divided by k, reads as its CPU time. A phase that took longer
than k times its CPU time (the host was short of cores even so) is not padded, and the fidelity
check reports the wait.

The worker sets the factor once (:func:`set_factor`); the replicators' step timer and the
worker's compute timer pace through :func:`pace`.

A straggler (a topology node with ``compute_scale`` s > 1) paces the same phases once more: after
dilation's padding, each CPU phase sleeps (s - 1) times the wall time it took, so its compute (a
real model's, or the shapes workload's stand-in sleep), encode, decode and optimizer update take s
times as long as the same phases on the other nodes, whatever share of the cores it got.

A schedule's straggler phases change s during a run: the orchestrator hands each worker its node's phases,
``(time_s, compute_scale)`` from the schedule's segments, times already stretched by the run's dilation; the
worker measures time from the start of its own first measured step (the ranks start it together, after a
barrier) and sets the scale :func:`scale_at` gives before each step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

__all__ = ["set_factor", "factor", "set_compute_scale", "compute_scale", "pace", "Phases", "scale_at"]

Phases = Sequence[tuple[float, float]]  # (seconds from the first measured step, compute scale), in time order

_factor = 1.0
_scale = 1.0


def set_factor(k: float) -> None:
    """This process's dilation factor (1: no pacing)."""
    global _factor
    _factor = max(1.0, float(k))


def factor() -> float:
    return _factor


def set_compute_scale(s: float) -> None:
    """This node's compute scale (1: as fast as the others; 2: every CPU phase twice as long)."""
    global _scale
    _scale = max(1.0, float(s))


def compute_scale() -> float:
    return _scale


def pace(wall_s: float, cpu_s: float) -> float:
    """Sleep out a phase that took ``wall_s`` and ``cpu_s`` until it lasted k x ``cpu_s``, then (a straggler) until it
    lasted s times that; returns the seconds slept."""
    short = _factor * cpu_s - wall_s
    slept = 0.0
    if _factor != 1.0 and short > 0:
        time.sleep(short)
        slept = short
    if _scale > 1.0:
        extra = (_scale - 1.0) * (wall_s + slept)
        time.sleep(extra)
        slept += extra
    return slept


def scale_at(phases: Phases, t: float, before: float) -> float:
    """The compute scale in force ``t`` seconds into the measured steps; ``before`` until the first phase."""
    scale = before
    for start, value in phases:
        if start > t:
            break
        scale = value
    return scale
