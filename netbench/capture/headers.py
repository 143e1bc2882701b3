"""Fast path through a header-only pcap: its records, and the IPv4/TCP fields the capture needs.

scapy reads a pcap record in ~15 us and dissects a frame into layer objects in ~200 us: about
4,000 packets/s on this project's 2-core hosts, so one 1gbit run's capture (hundreds of
thousands of frames) took minutes to parse. Our captures are classic pcap files of our own
emulated links, almost every frame untagged Ethernet + IPv4 + TCP with fields at fixed offsets:
``records`` and ``decode`` read them with ``struct`` (~2 us a packet together), and ``decode``
returns None for anything else (ARP, IPv6, VLAN tags, truncated frames), which the caller hands
to scapy.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

# Classic pcap magic numbers (as read little-endian) -> (byte order, timestamp fraction divisor)
_MAGIC = {0xA1B2C3D4: ("<", 1e6), 0xD4C3B2A1: (">", 1e6), 0xA1B23C4D: ("<", 1e9), 0x4D3CB2A1: (">", 1e9)}

_ETHERTYPE_IPV4 = 0x0800
_PROTO_TCP = 6
_ETH = struct.Struct("!12xH")  # destination and source MACs skipped, ethertype
_IPV4 = struct.Struct("!BxH5xB2x4s4s")  # version/ihl, total length, protocol, source, destination
_TCP = struct.Struct("!HHI4xB")  # ports, sequence number, data offset


class TcpHeaders(NamedTuple):
    """What parse_pcap reads from one IPv4/TCP frame."""

    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    header_bytes: int  # Ethernet + IP + TCP headers, options included
    payload_bytes: int  # TCP payload by the IP total length (the capture itself is truncated)


def decode(frame: bytes) -> TcpHeaders | None:
    """IPv4/TCP header fields of an untagged Ethernet frame, or None when it is anything else."""
    if len(frame) < 34 or _ETH.unpack_from(frame)[0] != _ETHERTYPE_IPV4:
        return None
    version_ihl, total_len, proto, src, dst = _IPV4.unpack_from(frame, 14)
    ihl = (version_ihl & 0x0F) * 4
    if version_ihl >> 4 != 4 or proto != _PROTO_TCP or ihl < 20 or len(frame) < 14 + ihl + 13:
        return None
    sport, dport, seq, offset = _TCP.unpack_from(frame, 14 + ihl)
    tcp_len = (offset >> 4) * 4
    return TcpHeaders(
        socket.inet_ntoa(src),
        socket.inet_ntoa(dst),
        sport,
        dport,
        seq,
        14 + ihl + tcp_len,
        max(0, total_len - ihl - tcp_len),
    )


CHUNK = 1 << 20  # bytes read at a time: memory stays flat however long the capture
MAX_CAPLEN = 1 << 18  # libpcap's largest snapshot length; a bigger record length means a corrupt file


def records(path: Path) -> Iterator[tuple[float, int, bytes]]:
    """(timestamp s, length on the wire, captured bytes) of each record of a classic pcap file.

    Streamed a chunk at a time, so a capture of any size is read in bounded memory.
    """
    with Path(path).open("rb") as fh:
        header = fh.read(24)
        if len(header) < 24:
            return  # tcpdump stopped before writing its header: nothing captured
        magic = struct.unpack_from("<I", header)[0]
        if magic not in _MAGIC:
            raise ValueError(f"{path}: not a classic pcap file (magic {magic:#x})")
        order, divisor = _MAGIC[magic]
        record = struct.Struct(order + "IIII")
        data, offset = b"", 0
        while True:
            need = 16
            if offset + 16 <= len(data):
                sec, frac, caplen, wirelen = record.unpack_from(data, offset)
                if caplen > MAX_CAPLEN:
                    raise ValueError(f"{path}: corrupt record (captured length {caplen})")
                need += caplen
            if offset + need > len(data):
                more = fh.read(CHUNK)
                if not more:
                    return  # the end, or a record cut short by a killed capture
                data, offset = data[offset:] + more, 0
                continue
            yield sec + frac / divisor, wirelen, data[offset + 16 : offset + need]
            offset += need
