"""Per-destination shaping of one interface: an HTB class per peer, chosen by the peer's address, the rest unshaped.

A host that runs one node of a topology talks to every other node over the same NIC, but each peer
sits at the end of a different path (a LAN hop to a neighbour, a WAN link to another site). So the
egress gets an HTB tree instead of one tbf::

    htb 1: (default 0: unclassified traffic is sent directly, unshaped: ssh, storage, DNS)
     └─ class 1:1   rate = ceil = this node's uplink          (its own NIC share, all peers together)
         ├─ class 1:10  ceil = path bottleneck to peer A   ── netem (path delay), or pure ACKs first, or pfifo
         ├─ class 1:11  ceil = path bottleneck to peer B   ── ...
         └─ u32 filters on 1:  ip dst <peer address>/32 -> its class

Each peer class is guaranteed an equal share of the uplink and may borrow up to its path's
bottleneck, so no peer exceeds its path and all of them together never exceed the uplink. Burst
and queue are sized from the rate as for tbf (:class:`~netbench.emulation.shaping.TbfParams`).
Delay, jitter and loss need netem beneath the class; where the kernel lacks it the caller refuses
before anything is installed. A class without them gets the emulator's two bands that serve pure ACKs ahead of
queued data (:mod:`netbench.emulation.acksfirst`) where the kernel has the tree, else one pfifo: the ACKs this
host sends a peer do not wait behind its data to that peer. A class with netem keeps netem alone (one queue, in
order of send time), where they still do.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netbench.emulation import acksfirst
from netbench.emulation.shaping import TbfParams
from netbench.topology.link import DirectionSpec

__all__ = ["PeerClass", "HtbShaping", "MAX_PEER_ADDRESSES", "install", "netem_missing"]

MAX_PEER_ADDRESSES = 16  # IPv4 addresses one peer may list on its interface
ROOT_HANDLE = "1:"
PARENT_CLASS = "1:1"
FIRST_PEER_MINOR = 0x10
FIRST_TREE_MAJOR = 0x8000  # peer k's ACKs-first tree: majors 0x8000 + 4k to + 2, clear of a netem leaf's 0x10 + k
TREE_MAJOR_STRIDE = 4
MAX_QUANTUM_BYTES = 200_000  # above this the kernel warns that a class's round-robin share is too large
ETH_P_IP = 0x0800
NETEM_LIMIT_PACKETS = 1_000_000


class PeerClass(BaseModel):
    """One peer node: the addresses that reach it and the path from this host to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node: str = Field(description="the peer's node in the topology")
    addresses: tuple[str, ...] = Field(min_length=1, max_length=MAX_PEER_ADDRESSES)
    path: DirectionSpec = Field(description="rate: the path's bottleneck; delay, jitter, loss: along the path")

    @field_validator("addresses")
    @classmethod
    def _ipv4(cls, addresses: tuple[str, ...]) -> tuple[str, ...]:
        for text in addresses:
            ipaddress.IPv4Address(text)  # a ValueError names the address
        return addresses


class HtbShaping(BaseModel):
    """The per-peer tree for one host: its uplink and a class per peer node."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["htb"] = "htb"
    node: str = Field(description="this host's node in the topology")
    uplink: DirectionSpec = Field(description="this node's access uplink: the ceiling of all peers together")
    peers: tuple[PeerClass, ...] = Field(min_length=1)

    @property
    def impaired(self) -> bool:
        return any(p.path.impaired for p in self.peers)

    @property
    def root_kinds(self) -> tuple[str, ...]:
        return ("htb",)

    def netem_missing(self) -> str:
        worst = max(self.peers, key=lambda p: (p.path.delay_s, p.path.jitter_s, p.path.loss))
        return netem_missing(self.node, worst.node, worst.path)

    def install(self, ipr: Any, index: int, offload: bool, acks_first: bool) -> dict[str, Any]:
        return install(ipr, index, self, offload, acks_first)


def netem_missing(node: str, peer: str, path: DirectionSpec) -> str:
    """Why a path with delay, jitter or loss cannot be shaped here: one line.

    netbench's delay line is no substitute on a real host: it must hold packets where they are
    forwarded, and holding them in the sender's own stack keeps them charged to the socket, so TCP
    Small Queues throttles the flow to a fraction of its rate.
    """
    what = ", ".join(
        part
        for part, on in (
            (f"{path.delay_s * 1e3:g} ms one-way delay", path.delay_s),
            (f"{path.jitter_s * 1e3:g} ms jitter", path.jitter_s),
            (f"{path.loss * 100:g}% loss", path.loss),
        )
        if on
    )
    return (
        f"--topology: the path {node} -> {peer} has {what}, which on real hosts needs the netem qdisc, and this "
        f"kernel lacks it (sch_netem); netbench's delay line works only inside an emulated cluster"
    )


def _class_args(rate_bps: float, ceil_bps: float, offload: bool) -> dict[str, Any]:
    burst = TbfParams.for_rate(ceil_bps, offload).burst_bytes
    return dict(
        rate=f"{int(rate_bps)}bit",
        ceil=f"{int(ceil_bps)}bit",
        burst=burst,
        cburst=burst,
        quantum=min(burst, MAX_QUANTUM_BYTES),
    )


def _leaf(
    ipr: Any, index: int, parent: str, k: int, path: DirectionSpec, offload: bool, acks_first: bool
) -> dict[str, Any]:
    """netem for the path's delay, jitter and loss; else, for peer ``k``, the ACKs-first tree (``acks_first``) or a
    FIFO, as long as tbf's queue at the path's rate."""
    major = FIRST_PEER_MINOR + k
    if path.impaired:
        netem: dict[str, Any] = {"delay": int(path.delay_s * 1e6), "limit": NETEM_LIMIT_PACKETS}
        if path.jitter_s:
            netem["jitter"] = int(path.jitter_s * 1e6)
        if path.loss:
            netem["loss"] = path.loss * 100
        ipr.tc("add", "netem", index=index, parent=parent, handle=f"{major:x}:", **netem)
        return {"netem": {"delay_s": path.delay_s, "jitter_s": path.jitter_s, "loss": path.loss}}
    frames = TbfParams.for_rate(path.rate_bps, offload).limit_frames
    if acks_first:
        return acksfirst.install(ipr, index, parent, frames, handle=FIRST_TREE_MAJOR + TREE_MAJOR_STRIDE * k)
    ipr.tc("add", "pfifo", index=index, parent=parent, handle=f"{major:x}:", limit=frames)
    return {"pfifo_frames": frames}


def _match_destination(address: str) -> str:
    """A u32 key on the IPv4 destination address (offset 16 of the IP header)."""
    return f"0x{int.from_bytes(socket.inet_aton(address), 'big'):08x}/0xffffffff+16"


def install(ipr: Any, index: int, shaping: HtbShaping, offload: bool, acks_first: bool) -> dict[str, Any]:
    """Build the tree on ``index`` (whose root must be the kernel's default), each peer class without netem serving
    pure ACKs first where ``acks_first``; returns what run.json records."""
    uplink = shaping.uplink.rate_bps
    ipr.tc("add", "htb", index=index, handle=ROOT_HANDLE, default=0)
    ipr.tc(
        "add-class", "htb", index=index, handle=PARENT_CLASS, parent=ROOT_HANDLE, **_class_args(uplink, uplink, offload)
    )
    share = uplink / len(shaping.peers)
    classes = []
    for k, peer in enumerate(shaping.peers):
        minor = FIRST_PEER_MINOR + k
        handle, ceil = f"1:{minor:x}", min(peer.path.rate_bps, uplink)
        ipr.tc(
            "add-class",
            "htb",
            index=index,
            handle=handle,
            parent=PARENT_CLASS,
            **_class_args(min(share, ceil), ceil, offload),
        )
        leaf = _leaf(ipr, index, handle, k, peer.path, offload, acks_first)
        for address in peer.addresses:
            ipr.tc(
                "add-filter",
                "u32",
                index=index,
                parent=ROOT_HANDLE,
                prio=1,
                protocol=ETH_P_IP,
                target=handle,
                keys=[_match_destination(address)],
            )
        classes.append(
            {
                "class": handle,
                "node": peer.node,
                "addresses": list(peer.addresses),
                "rate_bps": min(share, ceil),
                "ceil_bps": ceil,
                "delay_s": peer.path.delay_s,
                **leaf,
            }
        )
    return {"htb": {"node": shaping.node, "uplink_bps": uplink, "default": "unshaped", "classes": classes}}
