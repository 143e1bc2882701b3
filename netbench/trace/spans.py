"""Spans inside one step: when each phase and each collective ran, for the run's timeline.

The step's durations (``compress_s``, ``comm_s``, ...) say how long each phase took in total;
spans say when. :class:`~netbench.replicators.base.StepTimer` reports each encode, decode and
apply lap, :class:`~netbench.replicators.comm.GroupComm` each collective (a blocking one as
``communicate``, an async one from its start to its completion, and the time a rank blocked on it
as ``wait``), and the worker the compute. Times are ``time.perf_counter()`` (CLOCK_MONOTONIC,
one clock for every process of the host); the worker stores them relative to the step's start,
whose ``t_start`` (``time.time()``, read beside it) places them on the capture's wall clock.

Recording costs two clock reads and a list append per span, a few dozen per step. Outside a
step (or in a process that never calls :func:`begin`) nothing is recorded.
"""

from __future__ import annotations

from typing import Any

Span = list[Any]  # [name, start_s, end_s, args] with times relative to the step's start

_origin: float | None = None  # perf_counter() at the step's start; None: not recording
_spans: list[Span] = []


def begin(origin: float) -> None:
    """Start recording one step whose start was ``origin`` (``time.perf_counter()``)."""
    global _origin
    _origin = origin
    _spans.clear()


def add(name: str, start: float, end: float, **args: Any) -> None:
    """Record phase ``name`` from ``start`` to ``end`` (``time.perf_counter()`` readings)."""
    if _origin is not None:
        _spans.append([name, round(start - _origin, 7), round(end - _origin, 7), args])


def take() -> list[Span]:
    """The step's spans, in the order they were recorded; recording stops until the next :func:`begin`."""
    global _origin
    _origin = None
    out = list(_spans)
    _spans.clear()
    return out
