"""The emulated links' frames, declared once: MTU, header sizes, a full segment's payload and a full frame's bytes.

Wire units are the frame bytes tbf and tcpdump see on a veth: Ethernet header (14) + IP (20) + TCP with
timestamps (32) + payload; no preamble, FCS or inter-frame gap (veths have none). The emulator sizes tbf's
bursts in :data:`FRAME_BYTES`, the capture expands offloaded packets by :data:`MSS`, and the model frames
payload with the same numbers (:class:`netbench.model.framing.Framing`).
"""

from __future__ import annotations

__all__ = ["MTU", "IP_TCP_HEADER_BYTES", "ETH_HEADER_BYTES", "MSS", "FRAME_BYTES"]

MTU = 1500  # IP MTU of every emulated link (the veths' default)
IP_TCP_HEADER_BYTES = 52  # IPv4 (20) + TCP with the timestamp option (32), as Linux sends it
ETH_HEADER_BYTES = 14  # Ethernet header as tbf and tcpdump count it on a veth (no preamble, FCS or gap)
MSS = MTU - IP_TCP_HEADER_BYTES  # 1448: TCP payload of a full segment
FRAME_BYTES = MTU + ETH_HEADER_BYTES  # 1514: a full data frame on the wire
