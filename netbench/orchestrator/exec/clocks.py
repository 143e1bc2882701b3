"""Where an exec's schedule starts when its program records no steps: at the programs' launch, or at its first traffic.

A schedule's times count from rank 0's first measured step (``netbench.step``), which a program that records no
steps never reaches. For such a program (a published trainer run unmodified) ``--schedule-clock`` picks another time
0: ``start``, the programs' launch, exact but blind to how long they take to import and find each other (seconds to
tens of seconds on a crowded host); or ``traffic``, the moment rank 0's node has exchanged TRAFFIC_START_BYTES since
its launch, which no start-up chatter (a lighthouse's heartbeats, a store's keys) comes near and a training's first
collectives pass at once, so the schedule's times count from its training.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from netbench.counters import read_counters
from netbench.schedule.live import LaunchClock

if TYPE_CHECKING:
    from netbench.emulation.node import Node

__all__ = ["CLOCKS", "TRAFFIC_START_BYTES", "TrafficClock", "clock_for"]

CLOCKS = ("step", "start", "traffic")  # --schedule-clock's choices; "step" is the schedule's own (no clock here)
TRAFFIC_START_BYTES = 256 * 1024  # both ways on rank 0's interface since its launch
READ_EVERY_S = 0.2  # how often the counters are read until then (each read forks into the node's namespace)


class TrafficClock(LaunchClock):
    """Time 0 when rank 0's node has exchanged TRAFFIC_START_BYTES since :meth:`start` (its counters, polled)."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node, self.base, self.read_at = node, None, 0.0

    def start(self) -> None:
        counters = self.node.call(read_counters, self.node.iface)
        self.base = counters.tx_bytes + counters.rx_bytes

    def poll(self) -> float | None:
        now = time.monotonic()
        if self.t0 is not None or self.base is None or now - self.read_at < READ_EVERY_S:
            return self.t0
        self.read_at = now
        counters = self.node.call(read_counters, self.node.iface)
        if counters.tx_bytes + counters.rx_bytes - self.base >= TRAFFIC_START_BYTES:
            self.t0 = time.time()
        return self.t0


def clock_for(name: str, rank0: Node) -> LaunchClock | None:
    """The clock ``--schedule-clock NAME`` asks for (None: the schedule's own, rank 0's first measured step)."""
    if name == "start":
        return LaunchClock()
    if name == "traffic":
        return TrafficClock(rank0)
    return None
