"""The struct fast path reads the same fields scapy does, and declines what it does not know."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether

from netbench.capture.headers import decode, records
from netbench.capture.tcpdump import SNAPLEN

FRAMES = [
    Ether() / IP(src="198.18.0.1", dst="198.18.0.2") / TCP(sport=40000, dport=29500, seq=1, flags="PA") / (b"x" * 1448),
    Ether()
    / IP(src="198.18.0.2", dst="198.18.0.1")
    / TCP(
        sport=29500,
        dport=40000,
        seq=2**32 - 5,
        flags="A",
        options=[("NOP", None), ("NOP", None), ("Timestamp", (1, 2))],
    ),
    Ether()
    / IP(src="10.0.0.1", dst="10.0.0.2", options=[b"\x01\x01\x01\x00"])
    / TCP(sport=1, dport=2, seq=7)
    / (b"y" * 100),
    Ether()
    / IP(src="198.18.0.3", dst="198.18.0.4")
    / TCP(sport=5, dport=6, seq=9, options=[("MSS", 1460), ("SAckOK", b"")]),
]


@pytest.mark.parametrize("packet", FRAMES, ids=range(len(FRAMES)))
def test_fields_match_scapy(packet) -> None:
    raw = bytes(packet)
    parsed = Ether(raw)
    ip, tcp = parsed[IP], parsed[TCP]
    for frame in (raw, raw[:SNAPLEN]):  # what a header-only capture keeps
        got = decode(frame)
        assert got is not None
        assert (got.src, got.dst, got.sport, got.dport, got.seq) == (ip.src, ip.dst, tcp.sport, tcp.dport, tcp.seq)
        assert got.header_bytes == 14 + ip.ihl * 4 + tcp.dataofs * 4
        assert got.payload_bytes == ip.len - ip.ihl * 4 - tcp.dataofs * 4


@pytest.mark.parametrize(
    "packet",
    [
        Ether() / ARP(psrc="198.18.0.1", pdst="198.18.0.2"),
        Ether() / IPv6() / TCP(),
        Ether() / IP() / UDP() / b"ping",
        Ether() / Dot1Q(vlan=5) / IP() / TCP(),
    ],
    ids=["arp", "ipv6", "udp", "vlan"],
)
def test_everything_else_is_left_to_scapy(packet) -> None:
    assert decode(bytes(packet)) is None


def test_truncated_frames_are_declined() -> None:
    raw = bytes(FRAMES[0])
    assert decode(raw[:20]) is None
    assert decode(raw[:40]) is None  # IPv4 header complete, TCP header cut


@pytest.mark.parametrize("nano", [False, True], ids=["usec", "nsec"])
def test_records_match_scapy_reader(tmp_path, nano: bool) -> None:
    from scapy.utils import RawPcapReader, wrpcap

    path = tmp_path / "mixed.pcap"
    packets = [*FRAMES, Ether() / ARP(psrc="198.18.0.1"), Ether() / IP() / UDP() / b"ping"]
    for i, p in enumerate(packets):
        p.time = 1_700_000_000 + i * 0.001234567
    wrpcap(str(path), packets, snaplen=SNAPLEN, nano=nano)
    ours = list(records(path))
    theirs = list(RawPcapReader(str(path)))
    assert len(ours) == len(theirs) == len(packets)
    for (t, wire, data), (sdata, meta) in zip(ours, theirs):
        assert data == sdata and wire == meta.wirelen
        stamp = meta.sec + meta.usec / (1e9 if nano else 1e6)  # scapy's "usec" holds the file's fraction units
        assert t == pytest.approx(stamp, abs=1e-6)


def test_parse_pcap_agrees_with_a_scapy_dissection(tmp_path) -> None:
    """Every row of the fast path equals what dissecting the frame with scapy gives (GSO skb included)."""
    from scapy.utils import wrpcap

    from netbench.capture.pcap import MSS, parse_pcap

    gso = (
        Ether()
        / IP(src="198.18.0.1", dst="198.18.0.2")
        / TCP(sport=40000, dport=29500, seq=1449, flags="A")
        / (b"z" * (3 * MSS + 10))
    )
    packets = [
        *FRAMES,
        gso,
        Ether(src="02:00:00:00:00:01") / ARP(psrc="198.18.0.1"),
        Ether() / IP(src="198.18.0.2", dst="198.18.0.1") / UDP(),
    ]
    path = tmp_path / "run.pcap"
    wrpcap(str(path), packets, snaplen=SNAPLEN)
    rows = parse_pcap(path, "198.18.0.1")
    assert len(rows) == len(packets)
    for row, built in zip(rows.itertuples(), packets):
        packet = Ether(bytes(built))  # dissected, so lengths and offsets are filled in
        if TCP in packet:
            ip, tcp = packet[IP], packet[TCP]
            payload = ip.len - ip.ihl * 4 - tcp.dataofs * 4
            frames = max(1, -(-payload // MSS))
            header = 14 + ip.ihl * 4 + tcp.dataofs * 4
            assert (row.proto, row.payload_bytes, row.frames) == ("tcp", payload, frames)
            assert row.wire_bytes == (payload + frames * header if frames > 1 else len(packet))
            assert row.direction == ("tx" if ip.src == "198.18.0.1" else "rx")
        else:
            assert (row.payload_bytes, row.frames, row.wire_bytes) == (0, 1, len(packet))
    assert rows["retrans_bytes"].sum() == 0
    assert list(rows["proto"][-2:]) == ["l2", "ip"] and list(rows["direction"][-2:]) == ["tx", "rx"]
