"""What nodes leaving and joining cost on the wire under `netbench exec`, from a node's capture, for any program.

A program that records no steps still shows its churn in its packets. Two figures per node, in one pass over its
capture (packets come in time order):

- its bytes each way in every window between two schedule changes (a window is named by the segment in force, the
  one before the first change ``None``), so a segment's traffic sits beside the nodes taking part in it;
- for every join, what the node received from the moment its program was started again until it first sent a full
  segment (``MSS`` bytes of payload; or until it joined again): a trainer that catches up before it trains (a torchft
  heal: the joining node receives the weights and the optimizer's state, then takes its first step's all-reduce)
  receives its catch-up there, and little else, since a node that sends nothing bulky takes no part in a collective
  yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbench.capture.pcap import COLUMNS, packets
from netbench.frames import MSS

__all__ = ["windows", "churn_wire", "node_churn_wire"]

_T, _DIRECTION, _WIRE, _PAYLOAD = (COLUMNS.index(c) for c in ("t", "direction", "wire_bytes", "payload_bytes"))


def windows(applied: Sequence[dict[str, Any]], start: float, end: float) -> list[tuple[int | None, float, float]]:
    """(segment in force, from, to) in wall time, from ``start`` to ``end``, split at each applied change."""
    edges = [(None, start)] + [(int(row["segment"]), float(row["wall_time"])) for row in applied]
    return [(seg, t, edges[k + 1][1] if k + 1 < len(edges) else end) for k, (seg, t) in enumerate(edges)]


@dataclass
class _Join:
    wall_time: float
    until: float  # the node's next join: a catch-up not over by then never ended
    rx_payload: int = 0
    rx_wire: int = 0
    first_send: float | None = None

    def record(self) -> dict[str, Any]:
        return {
            "wall_time": round(self.wall_time, 4),
            "rx_payload_bytes": self.rx_payload,
            "rx_wire_bytes": self.rx_wire,
            "first_send_s": None if self.first_send is None else round(self.first_send - self.wall_time, 4),
        }


@dataclass
class _Sums:
    segment: int | None
    start: float
    end: float
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_KEYS, 0))

    def record(self, t0: float) -> dict[str, Any]:
        span = {"from_s": round(self.start - t0, 4), "to_s": round(self.end - t0, 4)}
        return {"segment": self.segment, **span, **self.sums}


_KEYS = ("tx_wire_bytes", "rx_wire_bytes", "tx_payload_bytes", "rx_payload_bytes")


def churn_wire(
    rows: Iterable[Sequence[Any]], spans: Sequence[tuple[int | None, float, float]], joins: Sequence[float]
) -> dict[str, Any]:
    """``rows``: a node's packet rows (:data:`~netbench.capture.pcap.COLUMNS`, in time order); ``spans``: its
    :func:`windows`; ``joins``: when its program was started again. Returns ``segments`` and ``joins``."""
    sums = [_Sums(seg, a, b) for seg, a, b in spans]
    starts = sorted(joins)
    caught = [_Join(t, starts[i + 1] if i + 1 < len(starts) else float("inf")) for i, t in enumerate(starts)]
    k = 0
    for row in rows:
        t, direction, wire, payload = row[_T], row[_DIRECTION], int(row[_WIRE]), int(row[_PAYLOAD])
        while k + 1 < len(sums) and t >= sums[k + 1].start:
            k += 1
        if sums and sums[k].start <= t < sums[k].end:
            sums[k].sums[f"{direction}_wire_bytes"] += wire
            sums[k].sums[f"{direction}_payload_bytes"] += payload
        for join in caught:
            if not join.wall_time <= t < join.until or join.first_send is not None:
                continue
            if direction == "tx" and payload >= MSS:
                join.first_send = t
            elif direction == "rx":
                join.rx_payload += payload
                join.rx_wire += wire
    t0 = spans[0][1] if spans else 0.0
    return {"segments": [s.record(t0) for s in sums], "joins": [j.record() for j in caught]}


def node_churn_wire(
    pcap: Path, address: str, spans: Sequence[tuple[int | None, float, float]], joins: Sequence[float]
) -> dict[str, Any]:
    """:func:`churn_wire` over the capture at ``pcap`` of the node at ``address``."""
    return churn_wire(packets(pcap, address), spans, joins)
