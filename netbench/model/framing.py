"""Payload bytes to wire bytes: Ethernet + IP + TCP headers, delayed ACKs and gloo's own control ops.

Why a model of framing at all: tbf shapes whole frames, and the capture counts whole frames, so a
model that only counts payload overestimates goodput by ~5 % at MTU 1500 (1448 payload bytes per
1514-byte frame) -- and in a ring every node sends data *and* ACKs on the same uplink, so ACK
frames compete with data.

Wire units are the frame bytes tbf and tcpdump see on a veth (:mod:`netbench.frames`): Ethernet header (14) +
IP (20) + TCP with timestamps (32) + payload; no preamble, FCS or inter-frame gap (veths have none).

gloo's TCP transport (gloo/transport/tcp/pair.{h,cc}) frames every message with a 48-byte
``Op`` preamble, and for each message the sender sends a NOTIFY_SEND_READY op and the receiver a
NOTIFY_RECV_READY op (preamble only). Those are protocol facts, modelled here as control bytes;
set ``gloo_preamble_bytes=0`` to model bare TCP streams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from netbench.frames import ETH_HEADER_BYTES, IP_TCP_HEADER_BYTES, MTU

__all__ = ["Framing", "FlowWire", "LinkBytes"]


@dataclass(frozen=True)
class LinkBytes:
    """Bytes one direction of a link carries, split into application payload and everything else."""

    payload: float = 0.0
    overhead: float = 0.0

    @property
    def total(self) -> float:
        return self.payload + self.overhead

    def __add__(self, other: LinkBytes) -> LinkBytes:
        return LinkBytes(self.payload + other.payload, self.overhead + other.overhead)

    def scaled(self, factor: float) -> LinkBytes:
        return LinkBytes(self.payload * factor, self.overhead * factor)


@dataclass(frozen=True)
class FlowWire:
    """Wire bytes of a one-way flow of messages: on the sender's uplink (forward) and back (reverse)."""

    forward: LinkBytes
    reverse: LinkBytes


class Framing(BaseModel):
    """Per-frame and per-message overheads of gloo over TCP over Ethernet."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mtu: int = Field(MTU, ge=576, le=65536, description="IP MTU of the emulated links")
    ip_tcp_header_bytes: int = Field(IP_TCP_HEADER_BYTES, ge=40, description="IPv4 (20) + TCP with timestamps (32)")
    eth_header_bytes: int = Field(ETH_HEADER_BYTES, ge=0, description="Ethernet header as captured on a veth (no FCS)")
    acks_per_segment: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="pure ACK frames per data segment on the reverse path (0.5: delayed ACK, one per 2 segments)",
    )
    gloo_preamble_bytes: int = Field(
        48, ge=0, description="gloo tcp Op preamble: six size_t fields (0 disables control ops)"
    )

    @property
    def mss(self) -> int:
        """TCP payload bytes per full segment (1448 at MTU 1500)."""
        return self.mtu - self.ip_tcp_header_bytes

    @property
    def header_bytes(self) -> int:
        """Non-payload bytes in every frame (66 at the defaults)."""
        return self.ip_tcp_header_bytes + self.eth_header_bytes

    @property
    def frame_bytes(self) -> int:
        """A full data frame on the wire (1514 at MTU 1500)."""
        return self.mss + self.header_bytes

    @property
    def ack_frame_bytes(self) -> int:
        """A pure ACK: headers only (66 at the defaults)."""
        return self.header_bytes

    def efficiency(self, ack_competition: bool = False) -> float:
        """Payload share of a full frame; with ACKs for a mirror flow sharing the same link if asked."""
        extra = self.acks_per_segment * self.ack_frame_bytes if ack_competition else 0.0
        return self.mss / (self.frame_bytes + extra)

    def segments(self, stream_bytes: float) -> int:
        """TCP segments carrying one write of ``stream_bytes`` (at least one)."""
        return max(1, math.ceil(stream_bytes / self.mss))

    def flow(self, messages: float, message_bytes: float, piggyback: bool = False) -> FlowWire:
        """Wire bytes for ``messages`` gloo messages of ``message_bytes`` each, sender -> receiver.

        Forward: payload, the data op's preamble, one send-ready notification per message, headers
        of all those segments and the ACKs for the reverse notifications. Reverse: one recv-ready
        notification per message, its headers and the ACKs for every forward segment.

        ``piggyback``: the same TCP connection carries as much data the other way at the same time
        (a 2-node ring, pairwise exchanges), so acknowledgements ride in data segments' headers and
        no pure ACK frames are sent.
        """
        if messages <= 0:
            return FlowWire(LinkBytes(), LinkBytes())
        pre = self.gloo_preamble_bytes
        control = 1 if pre else 0
        data_segments = self.segments(message_bytes + pre)
        fwd_segments = messages * (data_segments + control)
        rev_segments = messages * control
        hdr = self.header_bytes
        ack = 0.0 if piggyback else self.acks_per_segment * self.ack_frame_bytes
        forward = LinkBytes(
            payload=messages * message_bytes,
            overhead=messages * pre * (1 + control) + fwd_segments * hdr + rev_segments * ack,
        )
        reverse = LinkBytes(payload=0.0, overhead=messages * pre * control + rev_segments * hdr + fwd_segments * ack)
        return FlowWire(forward, reverse)
