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
"""

from __future__ import annotations

import time

__all__ = ["set_factor", "factor", "pace"]

_factor = 1.0


def set_factor(k: float) -> None:
    """This process's dilation factor (1: no pacing)."""
    global _factor
    _factor = max(1.0, float(k))


def factor() -> float:
    return _factor


def pace(wall_s: float, cpu_s: float) -> float:
    """Sleep out a phase that took ``wall_s`` and ``cpu_s`` until it lasted k x ``cpu_s``; returns the seconds slept."""
    short = _factor * cpu_s - wall_s
    if _factor == 1.0 or short <= 0:
        return 0.0
    time.sleep(short)
    return short
