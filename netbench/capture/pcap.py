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

import math
from pathlib import Path

import pandas as pd
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from netbench.capture.headers import decode, records

MSS = 1448  # MTU 1500 minus IPv4, TCP and the timestamp option
COLUMNS = ["t", "direction", "peer", "proto", "wire_bytes", "payload_bytes", "frames", "ack_only", "retrans_bytes", "skb_bytes"]
# What per_step adds to steps.csv, in order; runs without a capture keep these columns, empty.
STEP_COLUMNS = [f"capture_{d}_{name}" for d in ("tx", "rx")
                for name in ("wire_bytes", "payload_bytes", "packets", "ack_only_bytes", "retrans_bytes", "skb_bytes")]
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


def parse_pcap(path: Path, node_address: str) -> pd.DataFrame:
    """One row per captured packet; direction 'tx' when ``node_address`` sent it."""
    rows: list[tuple] = []
    tracker = RetransTracker()
    for t, wire, data in records(path):
        tcp = decode(data)
        if tcp is None:  # the rare frame the fast path does not know: ARP, UDP, anything else
            rows.append(_dissect(t, wire, data, node_address))
            continue
        direction = "tx" if tcp.src == node_address else "rx"
        peer = tcp.dst if direction == "tx" else tcp.src
        payload = tcp.payload_bytes
        frames = max(1, math.ceil(payload / MSS))
        wire_bytes = payload + frames * tcp.header_bytes if frames > 1 else wire
        again = tracker.retransmitted((tcp.src, tcp.sport, tcp.dst, tcp.dport), tcp.seq, payload)
        rows.append((t, direction, peer, "tcp", wire_bytes, payload, frames, payload == 0, again, wire))
    return pd.DataFrame(rows, columns=COLUMNS)


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


def per_step(packets: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Sum packets into step windows (step, t_from, t_to], per direction.

    Returns one row per step with capture_{tx,rx}_{wire,payload}_bytes, capture_{tx,rx}_packets
    (wire frames), capture_{tx,rx}_ack_only_bytes, capture_{tx,rx}_retrans_bytes and
    capture_{tx,rx}_skb_bytes (as captured, before GSO expansion).
    """
    out = windows[["step"]].copy()
    if packets.empty:
        for column in STEP_COLUMNS:
            out[column] = 0
        return out
    edges = [windows["t_from"].iloc[0], *windows["t_to"].tolist()]
    bins = pd.cut(packets["t"], bins=edges, labels=windows["step"].tolist(), right=True)
    packets = packets.assign(step=bins).dropna(subset=["step"])
    packets = packets.assign(ack_only_bytes=packets["wire_bytes"].where(packets["ack_only"], 0))
    summed = {"wire_bytes": "wire_bytes", "payload_bytes": "payload_bytes", "frames": "packets", "ack_only_bytes": "ack_only_bytes",
              "retrans_bytes": "retrans_bytes", "skb_bytes": "skb_bytes"}
    grouped = packets.groupby(["step", "direction"], observed=False)[list(summed)].sum()
    for d in ("tx", "rx"):
        part = grouped.xs(d, level="direction") if d in grouped.index.get_level_values("direction") else None
        for col, name in summed.items():
            values = part[col] if part is not None else pd.Series(dtype=float)
            out[f"capture_{d}_{name}"] = out["step"].map(values).fillna(0).astype("int64")
    return out


def by_peer(packets: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Total wire and payload bytes sent to each peer (tx direction)."""
    tx = packets[(packets["direction"] == "tx") & (packets["peer"] != "")]
    summary = tx.groupby("peer")[["wire_bytes", "payload_bytes"]].sum()
    return {peer: {k: int(v) for k, v in row.items()} for peer, row in summary.iterrows()}
