"""Alpha-beta cost of one collective call: messages, bytes per node, and time.

``ring`` is what gloo runs for CPU tensors: gloo's all_reduce is a reduce-scatter then an all-gather around the ring,
each buffer cut into 2N segments so one is in flight while the other is reduced (gloo/allreduce.cc) -- 4(N-1)
messages of B/2N per node, 2(N-1) sequential latencies, 2(N-1)/N of the buffer sent by every node. gloo's all_gather
passes each rank's contribution N-1 hops around the ring, in two halves (gloo/allgather.cc): 2(N-1) messages of B/2.
gloo's all_to_all is pairwise (gloo/alltoall.cc): every rank posts its N-1 sends and receives at once, one message
of B/N to each peer, so each node sends and receives (N-1)/N of the buffer after one latency, whatever the algorithm,
its downlink shared by the N-1 senders (incast). Each connection carries data both ways at once, yet captures of
6-node all_to_alls at 10mbit show pure ACKs as a ring's do (3.3 kB a step per node), so they are priced as a ring's.
A node's N-1 messages also wait behind each other in its uplink, and flows whose first ACK comes after Linux's
tail-loss probe timeout send their last segment again (:mod:`~netbench.model.probes`), which the model adds.
``tree`` (binomial reduce + broadcast) and ``halving_doubling`` (Rabenseifner all-reduce, recursive-doubling
all-gather) are for planning other backends.

Time = hops x alpha + critical-path payload x (wire bytes per payload byte) / rate, where alpha is the link's one-way
delay plus the calibrated per-message software overhead, and the wire factor comes from
:class:`~netbench.model.framing.Framing` (headers, ACKs competing on the same link, gloo control ops). In a ring of N
> 2 each node sends to one neighbour and receives from the other, so its pure ACKs share its uplink with its data; so
do they at N = 2, where one connection carries data both ways but measured rings still send pure ACKs; in pairwise
exchanges ACKs are modelled as piggybacked. Up and down rates may differ: the slower direction, after its own
framing, bounds the transfer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from netbench.model.framing import FlowWire, Framing, LinkBytes
from netbench.model.probes import probe_bytes
from netbench.settings import Setting

__all__ = [
    "Algorithm",
    "CollectiveKind",
    "ALGORITHMS",
    "Pattern",
    "Link",
    "CollectiveCost",
    "pattern",
    "flow_of",
    "cost",
]

CollectiveKind = Literal["all_reduce", "all_gather", "all_to_all", "pairwise", "p2p_ring", "none"]
Algorithm = Literal["ring", "tree", "halving_doubling"]
ALGORITHMS: tuple[str, ...] = ("ring", "tree", "halving_doubling")


@dataclass(frozen=True)
class Pattern:
    """How one collective call moves bytes, seen from an average node.

    ``critical_bytes`` is the payload serialised on one link along the critical path: equal to
    the per-node payload for pipelined rings, larger for trees (every level waits for the whole
    buffer). ``bidirectional``: each connection carries data both ways at once (pairwise
    exchanges), so ACKs piggyback on data instead of competing as frames of their own. A 2-node
    ring is not marked so: gloo's send and receive peers are then the same pair, but captures show
    it sends pure ACKs at the same rate as longer rings. ``fan_out``: a node hands all its messages
    to their sockets at once (gloo's all_to_all), so they wait behind each other in its uplink and
    draw spurious tail-loss probes (:mod:`~netbench.model.probes`).
    """

    hops: int
    messages_out: float
    message_bytes: float
    payload_out: float
    critical_bytes: float
    bidirectional: bool = False
    fan_out: bool = False


@dataclass(frozen=True)
class Link:
    """One node's attachment: uplink and downlink rates (bits/s) and the per-message latency alpha.

    ``one_way_s`` is the part of alpha that is the wire's one-way delay (the rest is software
    overhead); None when the caller does not split them (alpha is then all delay).
    """

    up_bps: float
    down_bps: float
    alpha_s: float
    one_way_s: float | None = None

    @property
    def delay_s(self) -> float:
        return self.alpha_s if self.one_way_s is None else min(self.one_way_s, self.alpha_s)


@dataclass(frozen=True)
class CollectiveCost:
    """Time and per-node wire bytes of one collective call."""

    time_s: float = 0.0
    latency_s: float = 0.0
    transfer_s: float = 0.0
    tx: LinkBytes = LinkBytes()
    rx: LinkBytes = LinkBytes()
    hops: float = 0.0

    def __add__(self, other: CollectiveCost) -> CollectiveCost:
        return CollectiveCost(
            self.time_s + other.time_s,
            self.latency_s + other.latency_s,
            self.transfer_s + other.transfer_s,
            self.tx + other.tx,
            self.rx + other.rx,
            self.hops + other.hops,
        )

    def scaled(self, factor: float) -> CollectiveCost:
        """``factor`` times this cost: several calls (factor > 1) or an average over a period (< 1)."""
        return CollectiveCost(
            self.time_s * factor,
            self.latency_s * factor,
            self.transfer_s * factor,
            self.tx.scaled(factor),
            self.rx.scaled(factor),
            self.hops * factor,
        )


def _log2_ceil(n: int) -> int:
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0


def _ring(kind: CollectiveKind, nbytes: float, n: int) -> Pattern:
    # Not bidirectional even at N=2: captures of 2-node gloo rings through tbf show 0.45-0.67 pure
    # ACK frames per data segment at 10-100mbit, as many as a 4-node ring's (piggybacking is rare).
    if kind == "all_reduce":
        sent = 2 * (n - 1) / n * nbytes
        return Pattern(2 * (n - 1), 4 * (n - 1), nbytes / (2 * n), sent, sent)
    # gloo/allgather.cc sends every contribution as two halves, so two are in flight per hop
    sent = (n - 1) * nbytes
    return Pattern(n - 1, 2 * (n - 1), nbytes / 2, sent, sent)


def _p2p_ring(nbytes: float, n: int) -> Pattern:
    """The quantized ring's all-reduce of a buffer of ``nbytes``: 2 (N - 1) hops, each one send of a whole chunk (1/N
    of the buffer) to the next rank, where gloo's ring cuts every chunk into two messages or more."""
    sent = 2 * (n - 1) / n * nbytes
    return Pattern(2 * (n - 1), 2 * (n - 1), nbytes / n, sent, sent)


def _all_to_all(nbytes: float, n: int) -> Pattern:
    """gloo's all_to_all of a buffer of ``nbytes``: a message of 1/N of it to each of the N - 1 peers at once."""
    sent = (n - 1) / n * nbytes
    return Pattern(1, n - 1, nbytes / n, sent, sent, fan_out=True)


def _tree(kind: CollectiveKind, nbytes: float, n: int) -> Pattern:
    levels = _log2_ceil(n)
    if kind == "all_reduce":
        # binomial reduce then binomial broadcast: every non-root node sends the whole buffer once in each
        out = 2 * (n - 1) / n * nbytes
        return Pattern(
            hops=2 * levels,
            messages_out=2 * (n - 1) / n,
            message_bytes=nbytes,
            payload_out=out,
            critical_bytes=2 * levels * nbytes,
        )
    # binomial gather of all contributions to a root, then broadcast of the N-contribution buffer
    gather_total = n / 2 * levels * nbytes
    bcast_total = (n - 1) * n * nbytes
    out = (gather_total + bcast_total) / n
    msgs = 2 * (n - 1) / n
    return Pattern(
        hops=2 * levels,
        messages_out=msgs,
        message_bytes=out / msgs,
        payload_out=out,
        critical_bytes=(n - 1) * nbytes + levels * n * nbytes,
    )


def _halving_doubling(kind: CollectiveKind, nbytes: float, n: int) -> Pattern:
    if kind == "all_reduce":
        core = 2 ** int(math.floor(math.log2(n)))
        extra = n - core
        steps = 2 * int(math.log2(core))
        sent = 2 * (core - 1) / core * nbytes + (2 * nbytes if extra else 0.0)
        hops = steps + (2 if extra else 0)
        return Pattern(hops, hops, sent / hops, sent, sent, bidirectional=True)
    # recursive doubling (Bruck for non-powers of two): ceil(log2 N) rounds, (N-1) contributions in total
    rounds = _log2_ceil(n)
    sent = (n - 1) * nbytes
    return Pattern(rounds, rounds, sent / rounds, sent, sent, bidirectional=True)


def _pairwise(nbytes: float) -> Pattern:
    """Every node and one partner send each other ``nbytes`` at once (gossip): one hop whatever the node count, its
    bytes through the sender's uplink and the partner's downlink while the partner's come the other way. Not marked
    bidirectional: both directions of one connection carry data at once, as in a ring of two, whose captures show
    pure ACKs all the same (see :func:`_ring`)."""
    return Pattern(1, 1, nbytes, nbytes, nbytes)


def pattern(kind: CollectiveKind, algorithm: Algorithm, nbytes: float, n: int) -> Pattern | None:
    """Message pattern of one call; ``nbytes`` is the buffer (all_reduce, all_to_all, p2p_ring), own contribution
    (all_gather) or what a node sends its partner (pairwise: the same whatever the algorithm, which concerns collectives
    of every node; p2p_ring, the quantized ring's point-to-point sends, is a ring whatever the algorithm).

    None when nothing moves: one participant, no bytes, or the ``none`` collective.
    """
    if kind == "none" or n < 2 or nbytes <= 0:
        return None
    if kind == "all_to_all":
        return _all_to_all(nbytes, n)
    if kind == "pairwise":
        return _pairwise(nbytes)
    if kind == "p2p_ring":
        return _p2p_ring(nbytes, n)
    if algorithm == "ring":
        return _ring(kind, nbytes, n)
    if algorithm == "tree":
        return _tree(kind, nbytes, n)
    if algorithm == "halving_doubling":
        return _halving_doubling(kind, nbytes, n)
    raise ValueError(f"unknown collective algorithm {algorithm!r} (choose from {', '.join(ALGORITHMS)})")


def flow_of(
    p: Pattern, framing: Framing, path_bps: float | None, uplink_bps: float | None, one_way_s: float
) -> FlowWire:
    """One node's wire bytes for ``p``'s messages over a path of ``path_bps`` (its slowest line rate; None: every
    frame at the line rate) with ``one_way_s`` of delay: the framing's, plus a fan-out's tail-loss probes, which come
    of its messages' wait in the sender's uplink (``uplink_bps``)."""
    flow = framing.flow(p.messages_out, p.message_bytes, piggyback=p.bidirectional, path_bps=path_bps)
    if not p.fan_out:
        return flow
    forward, reverse = probe_bytes(framing, p.messages_out, p.message_bytes, uplink_bps, one_way_s)
    return FlowWire(flow.forward + forward, flow.reverse + reverse)


def cost(p: Pattern | None, link: Link, framing: Framing) -> CollectiveCost:
    """Time and wire bytes of one call on ``link``.

    An average node sends ``messages_out`` messages and receives as many of the same size, so its
    uplink carries its data flows' forward bytes plus the reverse bytes (ACKs, notifications) of the
    flows it receives, and its downlink the mirror image.
    """
    if p is None:
        return CollectiveCost()
    path_bps = min(link.up_bps, link.down_bps)  # the sender's uplink, then the receiver's downlink
    flow = flow_of(p, framing, path_bps, link.up_bps, link.delay_s)
    tx = flow.forward + flow.reverse
    rx = flow.forward + flow.reverse
    up_factor = tx.total / p.payload_out
    down_factor = rx.total / p.payload_out
    transfer = 8.0 * p.critical_bytes * max(up_factor / link.up_bps, down_factor / link.down_bps)
    latency = p.hops * link.alpha_s
    return CollectiveCost(time_s=latency + transfer, latency_s=latency, transfer_s=transfer, tx=tx, rx=rx, hops=p.hops)


# plan's collective algorithm (gloo's ring by default, as a run measures)
ALGORITHM = Setting(
    "--algorithm", "algorithm", "text", "collective algorithm: ring (gloo), tree, halving-doubling.", default="ring"
)
