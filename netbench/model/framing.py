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

How many pure ACKs a receiver sends depends on how the data reaches it (captured on netbench's switch ports, offloads
off, so every skb is one frame). Frames spaced at the line rate are acknowledged by delayed ACK, one per two full
segments (``acks_per_segment``). The count goes by bytes, not segments: a receiver ACKs at once when more than one full
segment's bytes are unacknowledged (Linux, tcp_input.c ``__tcp_ack_snd_check``), so a message's short last segment and
gloo's 48-byte ops add their bytes toward the next ACK rather than drawing one each; a flow draws ``acks_per_segment``
ACKs per MSS of bytes delivered. Frames that arrive back-to-back are first ACKed the same way, until the receiving gloo
process wakes and reads; segments that land while it holds the socket are coalesced in the socket's backlog and
acknowledged once per coalesced skb, at most 64 KiB of payload apiece. ``wakeup_segments`` is how many frames a host
delivers back-to-back before the reader takes over: the calibration's per-message software time at its loopback rate. On
an emulated link the frames that leave back-to-back are those the shaper's token bucket lets through at once: a
message's first :func:`~netbench.frames.shaper_burst_bytes` of its path's slowest line rate (2 ms of it, at least 10
frames); the rest leaves at the line rate. So a 10 Mbit/s or 100 Mbit/s path is ACKed one per two segments (its bucket
is shorter than a reader's wake-up), as are messages of a few segments on any path, while a 200 KB message over 1 Gbit/s
(all of it in the 250 KB bucket) draws about one ACK per six segments. Captured: 0.45-0.5 at 10-100 Mbit/s, 0.07-0.09
for 200-400 KB messages at 1 Gbit/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from netbench.frames import (
    ETH_HEADER_BYTES,
    FRAME_BYTES,
    GSO_MAX_BYTES,
    IP_TCP_HEADER_BYTES,
    MTU,
    shaper_burst_bytes,
)
from netbench.settings import Override, Setting, table

__all__ = ["DEFAULT_KERNEL_HZ", "Framing", "FlowWire", "LinkBytes"]


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


DEFAULT_READER_WAKEUP_S = 50e-6  # a gloo reader's reaction to a message (the calibration measures it per host)
DEFAULT_HOST_BPS = 10e9  # how fast a host moves back-to-back frames between its namespaces (the calibration's loopback)


def wakeup_segments(wakeup_s: float, host_bps: float, frame_bytes: int = FRAME_BYTES) -> float:
    """Full frames a host delivers back-to-back while a reader wakes up: ``wakeup_s`` of frames at ``host_bps``."""
    return wakeup_s * host_bps / (8 * frame_bytes)


DEFAULT_WAKEUP_SEGMENTS = wakeup_segments(DEFAULT_READER_WAKEUP_S, DEFAULT_HOST_BPS)
DEFAULT_KERNEL_HZ = 250  # CONFIG_HZ where a host's was neither read nor measured: the kernel's default (Kconfig.hz)


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
        description="pure ACK frames per data segment arriving at the line rate (0.5: delayed ACK, one per 2 segments)",
    )
    coalesced_bytes: int = Field(
        GSO_MAX_BYTES - ETH_HEADER_BYTES - IP_TCP_HEADER_BYTES,
        ge=1,
        description="payload of the largest skb a receiver coalesces back-to-back segments into (one ACK each)",
    )
    wakeup_segments: float = Field(
        DEFAULT_WAKEUP_SEGMENTS,
        ge=0.0,
        description="segments of a back-to-back train that reach a receiver before its reader takes the socket",
    )
    gloo_preamble_bytes: int = Field(
        48, ge=0, description="gloo tcp Op preamble: six size_t fields (0 disables control ops)"
    )
    kernel_hz: int = Field(
        DEFAULT_KERNEL_HZ, ge=1, le=100_000, description="the senders' CONFIG_HZ: the tick their TCP timers fire on"
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

    def burst_bytes(self, message_bytes: float, path_bps: float | None) -> float:
        """Bytes of a message that leave its path's slowest shaper back-to-back (its token bucket's worth).

        ``path_bps``: the slowest line rate on the path (None: every frame leaves at the line rate).
        """
        if path_bps is None or message_bytes <= 0:
            return 0.0
        return min(float(message_bytes), float(shaper_burst_bytes(path_bps)))

    def acks_per_data_segment(self, message_bytes: float, path_bps: float | None = None) -> float:
        """Pure ACK frames per data segment of a flow of ``message_bytes`` messages over a path of ``path_bps``.

        Segments at the line rate, and a back-to-back train's first ``wakeup_segments`` (they reach the receiver
        before its reader does): ``acks_per_segment``. The rest of the train: one ACK per coalesced skb
        (``coalesced_bytes``).
        """
        segments = self.segments(message_bytes)
        train = self.burst_bytes(message_bytes, path_bps)
        train_segments = min(segments, math.ceil(train / self.mss)) if train > 0 else 0
        coalesced_segments = max(0.0, train_segments - self.wakeup_segments)
        acks = (segments - coalesced_segments) * self.acks_per_segment
        acks += math.ceil(coalesced_segments * self.mss / self.coalesced_bytes)
        return acks / segments

    def flow(
        self, messages: float, message_bytes: float, piggyback: bool = False, path_bps: float | None = None
    ) -> FlowWire:
        """Wire bytes for ``messages`` gloo messages of ``message_bytes`` each, sender -> receiver.

        Forward: payload, the data op's preamble, one send-ready notification per message, headers
        of all those segments and the ACKs for the reverse notifications. Reverse: one recv-ready
        notification per message, its headers and the ACKs for every forward segment.

        ``piggyback``: the same TCP connection carries as much data the other way at the same time
        (a 2-node ring, pairwise exchanges), so acknowledgements ride in data segments' headers and
        no pure ACK frames are sent. ``path_bps``: the slowest line rate on the data's path, which sets how many
        of its segments arrive back-to-back (:meth:`acks_per_data_segment`; None: all at the line rate).
        """
        if messages <= 0:
            return FlowWire(LinkBytes(), LinkBytes())
        pre = self.gloo_preamble_bytes
        control = 1 if pre else 0
        data_segments = self.segments(message_bytes + pre)
        fwd_segments = messages * (data_segments + control)
        rev_segments = messages * control
        hdr = self.header_bytes
        ack = 0.0 if piggyback else self.acks_per_data_segment(message_bytes + pre, path_bps) * self.ack_frame_bytes
        # A receiver ACKs at once when more than one full segment's bytes are unacknowledged (Linux tcp_input.c,
        # __tcp_ack_snd_check); a short segment (a message's last, a 48-byte op) only adds its bytes toward the
        # next ACK. So ACKs go by the full segments' worth of bytes received, not by segments.
        fwd_full = messages * (message_bytes + pre * (1 + control)) / self.mss
        rev_full = messages * pre * control / self.mss
        forward = LinkBytes(
            payload=messages * message_bytes,
            overhead=messages * pre * (1 + control) + fwd_segments * hdr + rev_full * ack,
        )
        reverse = LinkBytes(payload=0.0, overhead=messages * pre * control + rev_segments * hdr + fwd_full * ack)
        return FlowWire(forward, reverse)


# The framing plan prices: the links' MTU, and the ACKs a receiver sends per segment (calibrate stores it as given)
FRAMING_SETTINGS = table(
    (
        Setting("--mtu", "mtu", "count", "link MTU.", default=MTU, range=(576, 65536)),
        Setting(
            "--acks-per-segment",
            "acks_per_segment",
            "factor",
            "ACK frames per data segment [default: calibration, else 0.5].",
            range=(0.0, 1.0),
            overrides={
                "calibrate": Override(
                    why="calibrate writes the value plan falls back to; loopback cannot measure it",
                    default=0.5,
                    help="stored as given (loopback cannot measure it).",
                )
            },
        ),
    )
)
