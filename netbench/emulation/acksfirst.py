"""Pure ACKs ahead of queued data in a shaper: one direction's ACKs do not wait behind the other direction's bulk.

A shaped direction holds a deep FIFO (:class:`~netbench.emulation.shaping.TbfParams`: 1000 frames, 1.2 s at
10mbit). When both directions of a link carry bulk data at once (a ring of two, a gossip pair, every ring on a star,
where a node's uplink carries its own data and the ACKs of the flow it receives), each direction's ACKs would queue
behind the other direction's data. A real host does not do that: Linux's default qdisc (fq_codel) serves a sparse
flow, such as a flow of ACKs, ahead of the bulk flows, and a switch's shallow buffer holds little ahead of an ACK.
Under bbr, whose window on a link without delay is its ACK-aggregation allowance rather than a bandwidth-delay
product, a FIFO makes the direction with the smaller window run at the ratio of the two windows
(``scripts/bench_bidirectional.py`` measures it).

So beneath each tbf goes a two-band priority tree the kernel has everywhere (htb, pfifo and u32; fq and prio are
modules a kernel may lack): a pure ACK (IPv4 TCP, flags ACK alone, under :data:`PURE_ACK_MAX_BYTES`) goes to the first
band, everything else to the second; htb serves the first band whenever it has a packet; tbf above both still sets the
rate, so the link's bytes and rate are unchanged. Only packets that carry no data jump the queue: a small data
segment (a message's tail) overtaking its own flow's full ones would reorder the flow (letting every packet under 128
bytes first put 5-7 % more bytes than the model on the links of a 4-node ring of small messages at 10mbit). A pure
ACK that overtakes its own connection's data segments is processed on arrival and its empty segment dropped, as TCP
does for any segment ahead of the expected sequence.
"""

from __future__ import annotations

from typing import Any

from netbench.frames import FRAME_BYTES

__all__ = ["PURE_ACK_MAX_BYTES", "ROOT", "install", "resize"]

PURE_ACK_MAX_BYTES = 128  # a pure ACK with timestamps and four SACK blocks is 84 bytes of IPv4; a power of two
HANDLE = 0x20  # the tree's htb, beneath tbf's class
ROOT = f"{HANDLE:x}:"  # its handle as tc prints it
ACK_BAND, BULK_BAND = 1, 2
ETH_P_IP = 0x0800
BAND_RATE = "100gbit"  # a band never limits: tbf above the tree sets the link's rate
TCP_FLAGS_ACK = 0x10
TCP_FLAGS_MASK = 0x3F  # URG ACK PSH RST SYN FIN; ECN's two bits may be either


def pure_ack_keys() -> list[str]:
    """u32 keys (32-bit words of the IPv4 header and what follows, all of which must match): a 20-byte header, a
    total length under PURE_ACK_MAX_BYTES, protocol TCP, and TCP flags (byte 13 of the TCP header) ACK alone.

    One field a key: pyroute2 drops the zero bytes inside a mask (``0x0f00ff80`` is installed as ``0x0fff8000``)."""
    short = 0xFFFF & ~(PURE_ACK_MAX_BYTES - 1)
    return [
        "0x05000000/0x0f000000+0",  # IHL 5
        f"0x00000000/0x0000{short:04x}+0",  # total length < PURE_ACK_MAX_BYTES
        "0x00060000/0x00ff0000+8",  # protocol 6
        f"0x00{TCP_FLAGS_ACK:02x}0000/0x00{TCP_FLAGS_MASK:02x}0000+32",  # TCP bytes 12-15: offset, flags, window
    ]


def _leaf(band: int, handle: int = HANDLE) -> str:
    """The handle of the pfifo beneath ``band`` of the tree at major ``handle``."""
    return f"{handle + band:x}:"


def install(ipr: Any, index: int, parent: str, frames: int, handle: int = HANDLE) -> dict[str, Any]:
    """Graft the tree under ``parent`` (tbf's one class, ``1:1`` or ``10:1``, or a class of a per-peer htb); each
    band's FIFO holds ``frames``, as many as tbf's own queue would
    (:attr:`~netbench.emulation.shaping.TbfParams.limit_frames`). The tree takes the majors ``handle`` to ``handle +
    2`` (its htb and the two bands' FIFOs): one interface with several trees gives each its own. Returns what
    run.json records."""
    root = f"{handle:x}:"
    ipr.tc("add", "htb", index=index, parent=parent, handle=root, default=BULK_BAND)
    for band in (ACK_BAND, BULK_BAND):
        ipr.tc(
            "add-class", "htb", index=index, parent=root, handle=f"{root}{band}", rate=BAND_RATE, ceil=BAND_RATE,
            prio=band - 1, quantum=FRAME_BYTES,
        )  # fmt: skip
        ipr.tc("add", "pfifo", index=index, parent=f"{root}{band}", handle=_leaf(band, handle), limit=frames)
    ipr.tc(
        "add-filter", "u32", index=index, parent=root, prio=1, protocol=ETH_P_IP, target=f"{root}{ACK_BAND}",
        keys=pure_ack_keys(),
    )  # fmt: skip
    return {"acks_first": {"pure_ack_below_bytes": PURE_ACK_MAX_BYTES, "frames_per_band": frames}}


def resize(ipr: Any, index: int, frames: int) -> None:
    """Size each band's FIFO to ``frames`` after a rate changed in place, where the tree is installed: tbf resizes
    only a FIFO of its own, not one beneath a child qdisc."""
    if not any(msg["handle"] == HANDLE << 16 for msg in ipr.get_qdiscs(index=index)):
        return
    for band in (ACK_BAND, BULK_BAND):
        ipr.tc("change", "pfifo", index=index, parent=f"{ROOT}{band}", handle=_leaf(band), limit=frames)
