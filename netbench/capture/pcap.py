"""Parse a header-only capture into one row per packet: direction, peer, payload and framing.

Framing is everything on the wire that is not TCP payload: Ethernet, IP and TCP headers, and
whole ACK-only packets. With segmentation offloads on, one captured skb may stand for several
wire frames; those are expanded to ceil(payload / MSS) frames, each with its own headers, so the
capture reports the bytes a real MTU-1500 Ethernet would carry. ``skb_bytes`` keeps what the
kernel handed over, unexpanded: the quantity interface counters count, so the two independent
sources can be held against each other at any rate, offloads on or off.

Retransmitted bytes are TCP payload whose sequence range a flow has already carried: the switch
port sees a node's segments before the delay line drops any, so a lost segment shows up twice
there (its retransmission counted), and a node's received stream shows the hole being filled.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from netbench.capture.headers import decode, records
from netbench.frames import MSS  # offloaded skbs are expanded into frames of this much payload
from netbench.rundir.steps_schema import Col, capture_column, columns_of

COLUMNS = [
    "t",
    "direction",
    "peer",
    "proto",
    "wire_bytes",
    "payload_bytes",
    "frames",
    "ack_only",
    "retrans_bytes",
    "skb_bytes",
]
# What per_step adds to steps.csv, in order; runs without a capture keep these columns, empty.
STEP_COLUMNS = [c.value for c in columns_of("capture")]
_SEQ_SPACE = 1 << 32


class RetransTracker:
    """Per TCP flow, the highest sequence number carried so far; payload below it was sent before.

    Distances are taken modulo 2^32 (signed), so sequence wrap-around and flows that began
    before the capture are handled; the delay line never reorders a flow, so a segment starting
    below the highest end is a retransmission, not a late original.
    """

    def __init__(self) -> None:
        self.high: dict[tuple, int] = {}

    def retransmitted(self, flow: tuple, seq: int, payload: int) -> int:
        """Bytes of ``payload`` (starting at ``seq``) that ``flow`` has carried before."""
        if payload <= 0:
            return 0
        high = self.high.get(flow)
        if high is None:
            self.high[flow] = (seq + payload) % _SEQ_SPACE
            return 0
        start = (seq - high + _SEQ_SPACE // 2) % _SEQ_SPACE - _SEQ_SPACE // 2  # signed distance from the high mark
        end = start + payload
        if end > 0:
            self.high[flow] = (high + end) % _SEQ_SPACE
        return min(end, 0) - start if start < 0 else 0


def packets(path: Path, node_address: str) -> Iterator[tuple]:
    """One row (as COLUMNS) per captured packet, streamed; direction 'tx' when ``node_address`` sent it."""
    tracker = RetransTracker()
    for t, wire, data in records(path):
        tcp = decode(data)
        if tcp is None:  # the rare frame the fast path does not know: ARP, UDP, anything else
            yield _dissect(t, wire, data, node_address)
            continue
        direction = "tx" if tcp.src == node_address else "rx"
        peer = tcp.dst if direction == "tx" else tcp.src
        payload = tcp.payload_bytes
        frames = max(1, math.ceil(payload / MSS))
        wire_bytes = payload + frames * tcp.header_bytes if frames > 1 else wire
        again = tracker.retransmitted((tcp.src, tcp.sport, tcp.dst, tcp.dport), tcp.seq, payload)
        yield (t, direction, peer, "tcp", wire_bytes, payload, frames, payload == 0, again, wire)


def parse_pcap(path: Path, node_address: str) -> pd.DataFrame:
    """Every packet row at once: for tests and small captures (runs stream through :func:`bin_pcap`)."""
    return pd.DataFrame(list(packets(path, node_address)), columns=COLUMNS)


def _dissect(t: float, wire: int, data: bytes, node_address: str) -> tuple:
    """A packet row for a frame that is not IPv4/TCP, dissected by scapy: framing only, no payload."""
    frame = Ether(data)
    ip = frame.getlayer(IP)
    if ip is None:  # ARP and other non-IP frames
        return (t, "tx" if _l2_from_node(frame, node_address) else "rx", "", "l2", wire, 0, 1, False, 0, wire)
    direction = "tx" if ip.src == node_address else "rx"
    return (t, direction, ip.dst if direction == "tx" else ip.src, "ip", wire, 0, 1, False, 0, wire)


def _l2_from_node(frame, node_address: str) -> bool:
    psrc = getattr(frame.payload, "psrc", None)  # ARP
    return psrc == node_address


_SUMMED = ("wire_bytes", "payload_bytes", "packets", "ack_only_bytes", "retrans_bytes", "skb_bytes")


class StepBins:
    """Running sums of packet rows per step window (t_from, t_to] and direction, and tx bytes per peer.

    Memory is a few integers per step, whatever the number of packets. Windows come from each
    worker's wall clock; if it stepped backwards, the edges are made monotonic (the windows the
    step skipped stay empty) instead of failing the whole capture.
    """

    def __init__(self, windows: pd.DataFrame) -> None:
        self.steps = windows[Col.STEP].tolist()
        edges = [windows["t_from"].iloc[0], *windows["t_to"].tolist()] if self.steps else []
        self.edges = list(itertools.accumulate(edges, max))
        self.clock_went_back = self.edges != edges
        self.sums = {d: [[0] * len(_SUMMED) for _ in self.steps] for d in ("tx", "rx")}
        self.peers: dict[str, list[int]] = {}
        self.outside = 0  # packets before the first step or after the last
        self.packets = 0
        self.last_t = float("-inf")

    def add(self, row: tuple) -> None:
        t, direction, peer, _, wire, payload, frames, ack_only, again, skb = row
        self.packets += 1
        self.last_t = max(self.last_t, t)
        if direction == "tx" and peer:
            sent = self.peers.setdefault(peer, [0, 0])
            sent[0] += wire
            sent[1] += payload
        i = bisect.bisect_left(self.edges, t)  # edges[i-1] < t <= edges[i]
        if i == 0 or i > len(self.steps):
            self.outside += 1
            return
        for k, value in enumerate((wire, payload, frames, wire if ack_only else 0, again, skb)):
            self.sums[direction][i - 1][k] += value

    def truncated(self, max_packets: int) -> bool:
        """True when the capture holds ``max_packets`` packets: tcpdump stopped there (-c), not the traffic."""
        return self.packets >= max_packets

    def frame(self, max_packets: int | None = None) -> pd.DataFrame:
        """One row per step: step, then STEP_COLUMNS; steps the capture stopped before (at ``max_packets``) stay
        empty.
        """
        out = pd.DataFrame({Col.STEP.value: self.steps})
        for d in ("tx", "rx"):
            for k, name in enumerate(_SUMMED):
                out[capture_column(d, name).value] = pd.Series([row[k] for row in self.sums[d]], dtype="int64")
        if max_packets is not None and self.truncated(max_packets):
            cut = pd.Series(self.edges[1:]) > self.last_t  # windows that end after the capture stopped
            columns = [c for c in out if c != Col.STEP]
            out[columns] = out[columns].astype("float64").mask(cut)
        return out

    def by_peer(self) -> dict[str, dict[str, int]]:
        """Total wire and payload bytes sent to each peer (tx direction)."""
        return {
            peer: {"wire_bytes": wire, "payload_bytes": payload} for peer, (wire, payload) in sorted(self.peers.items())
        }


def bin_pcap(path: Path, node_address: str, windows: pd.DataFrame) -> StepBins:
    """Stream a capture into per-step sums: bounded memory however many packets it holds."""
    bins = StepBins(windows)
    for row in packets(path, node_address):
        bins.add(row)
    return bins


def per_step(packets: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Sum packet rows (as :func:`parse_pcap` returns) into step windows (step, t_from, t_to], per direction.

    Returns one row per step with capture_{tx,rx}_{wire,payload}_bytes, capture_{tx,rx}_packets
    (wire frames), capture_{tx,rx}_ack_only_bytes, capture_{tx,rx}_retrans_bytes and
    capture_{tx,rx}_skb_bytes (as captured, before GSO expansion).
    """
    bins = StepBins(windows)
    for row in packets[COLUMNS].itertuples(index=False, name=None):
        bins.add(row)
    return bins.frame()
