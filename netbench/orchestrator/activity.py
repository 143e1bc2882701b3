"""Waits on setup that end on a signal, and count as stalled only while the processes waited on do nothing.

Setting a run up -- interpreters importing torch, the fork server's preload, workers building their models and
joining the process group -- costs CPU time in proportion to the workers, and a host with fewer cores than workers
runs them by turns: 64 workers on 2 cores join minutes after the first one started. A fixed deadline is too short for
many nodes or too long to notice a hang. So a wait on setup ends on its signal (an answer on a pipe, a record in a
file, an exit), and its clock runs only while the processes it waits on use no CPU: a process that is importing is
working, one that sits idle for a long time is not.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["BUSY_CPU_S", "STALL_S", "cpu_seconds", "Activity", "Stalled", "wait_while_working"]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BUSY_CPU_S = 0.05  # CPU time the processes must use between two marks to count as working (a 5 ms poll loop uses less)
STALL_S = 60.0  # how long a process being set up may use no CPU before the wait gives up on it


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU time of process ``pid`` (all its threads), from /proc; None once it has gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Activity:
    """When a set of processes last worked: their CPU time together grew by BUSY_CPU_S since the last mark."""

    def __init__(self) -> None:
        self.since = time.monotonic()
        self._base: float | None = None

    def idle_s(self, pids: Iterable[int]) -> float:
        """Seconds since ``pids`` were last seen working (0 when they are working now, or when the set changed)."""
        total = sum(c for pid in pids if (c := cpu_seconds(pid)) is not None)
        now = time.monotonic()
        if self._base is None or not 0 <= total - self._base < BUSY_CPU_S:
            self._base, self.since = total, now
        return now - self.since

    def mark(self) -> None:
        """Something else showed progress (a record written): the clock starts again."""
        self.since = time.monotonic()


class Stalled(RuntimeError):
    """A process being waited on used no CPU for the stall limit, or exited, before the signal came."""


def wait_while_working(
    ready: Callable[[], bool], pid: int, alive: Callable[[], bool], stall_s: float = STALL_S, poll_s: float = 0.02
) -> None:
    """Until ``ready()``; Stalled where process ``pid`` exits (``alive()`` false) or uses no CPU for ``stall_s``."""
    activity = Activity()
    while not ready():
        if not alive():
            raise Stalled("it exited")
        idle = activity.idle_s([pid])
        if idle > stall_s:
            raise Stalled(f"it used no CPU for {idle:.0f} s")
        if poll_s:
            time.sleep(poll_s)
