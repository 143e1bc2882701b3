"""The emulated links' frames, declared once: MTU, header sizes, a full segment's payload and a full frame's bytes.

Wire units are the frame bytes tbf and tcpdump see on a veth: Ethernet header (14) + IP (20) + TCP with
timestamps (32) + payload; no preamble, FCS or inter-frame gap (veths have none). The emulator sizes tbf's
bursts in :data:`FRAME_BYTES`, the capture expands offloaded packets by :data:`MSS`, and the model frames
payload with the same numbers (:class:`netbench.model.framing.Framing`).
"""

from __future__ import annotations

__all__ = [
    "MTU",
    "IP_TCP_HEADER_BYTES",
    "ETH_HEADER_BYTES",
    "MSS",
    "FRAME_BYTES",
    "GSO_MAX_BYTES",
    "shaper_burst_bytes",
]

MTU = 1500  # IP MTU of every emulated link (the veths' default)
IP_TCP_HEADER_BYTES = 52  # IPv4 (20) + TCP with the timestamp option (32), as Linux sends it
ETH_HEADER_BYTES = 14  # Ethernet header as tbf and tcpdump count it on a veth (no preamble, FCS or gap)
MSS = MTU - IP_TCP_HEADER_BYTES  # 1448: TCP payload of a full segment
FRAME_BYTES = MTU + ETH_HEADER_BYTES  # 1514: a full data frame on the wire
# the largest skb TSO/GSO hands a device: 64 KiB of segments and one frame's headers
GSO_MAX_BYTES = 65536 + FRAME_BYTES
SHAPER_BURST_S = 2e-3  # the emulator's shaper lets this much of its line rate through at once


def shaper_burst_bytes(rate_bps: float, offload: bool = False) -> int:
    """The emulated links' token bucket: 2 ms of line rate, at least 10 frames (or two GSO packets with offloads on).

    Declared here because two parts read it: the emulator sizes its shapers with it, and the model's framing
    predicts from it how much of a message leaves a shaper back-to-back instead of at the line rate.
    """
    burst = max(int(rate_bps / 8 * SHAPER_BURST_S), 10 * FRAME_BYTES)
    return max(burst, 2 * GSO_MAX_BYTES) if offload else burst
