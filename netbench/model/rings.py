"""gloo's rings laid over a network graph: which link directions each ring hop crosses, and what one call costs.

A ring of P ranks is P hops (rank r to rank r + 1 under the placement), each a path through the topology. Rings that
run at once (one flat ring, or one replication ring per shard) share the links they cross: a direction carrying the
data of ``n`` hops gives each of them 1/n of its rate, and it also carries the ACKs and ready notifications of the
hops whose reverse path crosses it. Each hop is then priced as :func:`~netbench.model.steptime.call_cost` prices the
star's one link (framing, gloo's two segments in flight behind the receiver's notification, TCP's window), with its
own bottleneck and delay:

* a pipelined call moves at the pace of its slowest hop (every rank's next segment waits for the one it receives), so
  it takes the largest of the hops' times;
* the data runs forward and the notifications back, so a hop's pipeline pays ``(d_forward + d_reverse) / 2`` per
  one-way delay (a round trip is the two together);
* a tiny all-reduce (one word per segment) passes its words hop by hop: 2(P - 1) consecutive hops' forward delays,
  from the start that makes the longest chain.

A collective whose every rank sends to every other at once (gloo's all_to_all: :data:`MESH_KINDS`) runs on the
rings' mesh instead (:class:`Mesh`): each of its P (P - 1) flows on its own path, carrying 1/(P - 1) of what a rank
sends; a direction's load is the flows crossing it, so the flows that share a WAN link are priced on it together,
and the call takes as long as its slowest pair (nodes alike in switch and access link priced as one class).

For N nodes behind one switch with the same links these are exactly the star's numbers. Large clusters stay cheap:
hops with the same rates, sharing and delays are priced once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from statistics import median_low

from netbench.model.collectives import CollectiveCost, Link, Pattern, flow_of, pattern
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing, LinkBytes
from netbench.model.gloo_tcp import STEADY_TIMERS, GlooTime, KernelTimers, chain_time_s, ring_operations
from netbench.model.steptime import ring_time
from netbench.tcp import TcpSettings
from netbench.topology.graph import Hop, NodeSpec, Topology

__all__ = ["Routes", "RingHop", "RingSet", "Mesh", "HopPrice", "BACKWARD_RINGS", "MESH_KINDS"]

# Collectives whose ring runs the other way round: gloo's ring all-reduce sends each rank's data to the rank before it
# (captures through netbench's switches: rank r to rank r - 1), its all-gather to the rank after it. Bytes per link
# direction differ where the two ways round differ (a WAN hop's data one way, its ACKs the other).
BACKWARD_RINGS: frozenset[str] = frozenset({"all_reduce"})

# Collectives whose every rank sends to each other rank at once, one connection a pair (gloo/alltoall.cc): priced on
# the mesh of pairs, whose flows cross the links their own paths do, not on the ring's hops.
MESH_KINDS: frozenset[str] = frozenset({"all_to_all"})


class Routes:
    """Node-to-node paths of a topology, routed between switches on a copy with one node per switch.

    Nodes are leaves (one access link each), so a path is the source's uplink, the switches' route, and the
    destination's downlink; routing thousands of nodes pairwise would cost seconds, routing the switches does not.
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.access = {link.a: link for link in topology.links if link.a not in topology.switches}
        groups = topology.groups()
        if len(groups) < 2:
            self._switches = None
            return
        reps = [topology.nodes[members[0]] for members in groups.values()]
        self._switches = Topology(
            kind=topology.kind,
            nodes=tuple(NodeSpec(name=n.name, switch=n.switch) for n in reps),
            switches=topology.switches,
            links=(*(self.access[n.name] for n in reps), *topology.trunks),
        )

    def path(self, src: int, dst: int) -> tuple[Hop, ...]:
        a, b = self.topology.nodes[src], self.topology.nodes[dst]
        middle = (
            () if a.switch == b.switch or self._switches is None else self._switches.switch_path(a.switch, b.switch)
        )
        return (Hop(self.access[a.name].name, True), *middle, Hop(self.access[b.name].name, False))

    def delay_s(self, path: tuple[Hop, ...]) -> float:
        """One-way delay along ``path`` (the sum over its directions, as :meth:`Topology.one_way_delay_s`)."""
        return sum(self.topology.direction(h).delay_s for h in path)


@dataclass(frozen=True)
class RingHop:
    """Rank r's node sending to rank r + 1's: the data's path and the way back (ACKs, ready notifications)."""

    src: int
    dst: int
    forward: tuple[Hop, ...]
    reverse: tuple[Hop, ...]


@dataclass(frozen=True)
class HopPrice:
    """What prices a hop: every direction it crosses as (data, acks, rate), its two delays, the slowest line rate its
    data crosses (how many of its segments arrive back-to-back: the framing's ACK count) and the rate of its sender's
    uplink (where a fan-out's messages wait: its tail-loss probes). Data and acks count what a rank's call sends: the
    ring hops crossing the direction, or a mesh's flows times 1/(P - 1) each."""

    directions: tuple[tuple[int, int, float], ...]
    forward_s: float
    reverse_s: float
    path_bps: float | None = None
    uplink_bps: float | None = None

    @property
    def pipeline_delay_s(self) -> float:
        return (self.forward_s + self.reverse_s) / 2

    def transfer_s(self, p: Pattern, framing: Framing) -> float:
        """The call's bytes through this hop's busiest direction: its data hops' and ack hops' bytes at its rate."""
        flow = flow_of(p, framing, self.path_bps, self.uplink_bps, self.pipeline_delay_s)
        worst = max(
            (flow.forward.scaled(data) + flow.reverse.scaled(acks)).total / p.payload_out / rate
            for data, acks, rate in self.directions
        )
        return 8.0 * p.critical_bytes * worst


class RingSet:
    """Rings of the same size that run at once on one topology (ranks given as node indices, in ring order).

    ``share``: what part of a rank's call each hop carries (1 around a ring, 1/(P - 1) for a :class:`Mesh`'s flows).
    """

    def __init__(self, routes: Routes, rings: Sequence[Sequence[int]]) -> None:
        self.routes = routes
        self.ranks = tuple(tuple(r) for r in rings)
        self.rings = tuple(
            tuple(RingHop(s, d, routes.path(s, d), routes.path(d, s)) for s, d in zip(r, (*r[1:], r[0]))) for r in rings
        )
        self.peers = len(rings[0]) if rings else 0
        self.share = 1.0

    @cached_property
    def mesh(self) -> RingSet:
        """The flows of a collective among each ring's ranks in which every rank sends to every other at once
        (:class:`Mesh`), each ``1 / (P - 1)`` of a rank's call. A ring of two is its own."""
        return self if self.peers <= 2 else Mesh(self.routes, self.ranks)

    def crossings(self) -> Iterator[tuple[RingHop, tuple[Hop, ...], float, bool]]:
        """(hop, directions, how many hops it stands for on each, whether they are its data path rather than its way
        back) covering every direction every hop crosses: what the counts per direction and the bytes sum."""
        for ring in self.rings:
            for hop in ring:
                yield hop, hop.forward, 1, True
                yield hop, hop.reverse, 1, False

    def for_kind(self, kind: str) -> RingSet:
        """What a call of ``kind`` runs on: the mesh for :data:`MESH_KINDS`, these rings otherwise."""
        return self.mesh if kind in MESH_KINDS else self

    def carries(self, h: Hop) -> str:
        """What crosses direction ``h``, in words: ``2 ring hops``, ``4 all-to-all flows``."""
        n = round(self.data[h])
        unit = "ring hop" if self.share == 1.0 else "all-to-all flow"
        return f"{n} {unit}{'s' if n != 1 else ''}"

    @cached_property
    def data(self) -> Counter[Hop]:
        """Ring hops (a mesh's flows) whose data crosses each link direction."""
        return Counter(h for ring in self.rings for hop in ring for h in hop.forward)

    @cached_property
    def acks(self) -> Counter[Hop]:
        """Ring hops (a mesh's flows) whose ACKs and notifications cross each link direction."""
        return Counter(h for ring in self.rings for hop in ring for h in hop.reverse)

    @cached_property
    def _delays(self) -> dict[RingHop, tuple[float, float]]:
        return {
            hop: (self.routes.delay_s(hop.forward), self.routes.delay_s(hop.reverse))
            for ring in self.rings
            for hop in ring
        }

    @cached_property
    def _trunks(self) -> frozenset[str]:
        return frozenset(link.name for link in self.routes.topology.trunks)

    def uplink_bps(self, hop: RingHop) -> float:
        """The line rate of the first direction the hop's data crosses: its sender's uplink."""
        return self.routes.topology.direction(hop.forward[0]).rate_bps

    def mean_delay_s(self, hop: RingHop) -> float:
        """The mean of the hop's two one-way delays: half the round trip its data and its ACKs take."""
        return (self.routes.delay_s(hop.forward) + self.routes.delay_s(hop.reverse)) / 2

    def rate_bps(self, h: Hop, trunk_scale: float = 1.0) -> float:
        """A direction's line rate, trunks (WAN links, rack uplinks) scaled by ``trunk_scale``."""
        rate = self.routes.topology.direction(h).rate_bps
        return rate * trunk_scale if h.link in self._trunks else rate

    def price(self, hop: RingHop, trunk_scale: float = 1.0) -> HopPrice:
        crossed = dict.fromkeys((*hop.forward, *hop.reverse))
        share = self.share
        directions = tuple(
            sorted((share * self.data[h], share * self.acks[h], self.rate_bps(h, trunk_scale)) for h in crossed)
        )
        return HopPrice(directions, *self._delays[hop], path_bps=self.path_bps(hop), uplink_bps=self.uplink_bps(hop))

    def path_bps(self, hop: RingHop, backward: bool = False) -> float:
        """The slowest line rate the hop's data crosses (``backward``: data from its destination to its source): it
        decides how much of each message reaches the receiver back-to-back (the framing's ACK count)."""
        return min(self.routes.topology.direction(h).rate_bps for h in self.data_path(hop, backward))

    @staticmethod
    def data_path(hop: RingHop, backward: bool = False) -> tuple[Hop, ...]:
        """The directions the hop's data crosses (``backward``: those its ACKs cross when it runs forward)."""
        return hop.reverse if backward else hop.forward

    def prices(self, trunk_scale: float = 1.0) -> tuple[tuple[HopPrice, ...], ...]:
        return tuple(tuple(self.price(hop, trunk_scale) for hop in ring) for ring in self.rings)

    def call_cost(
        self,
        exchange: Exchange,
        prices: Sequence[Sequence[HopPrice]],
        overhead_s: float,
        framing: Framing,
        tcp: TcpSettings,
        idle_s: float | None,
        paced_flight_bytes: float,
        cpu_work_s: float,
        fresh: bool = False,
        timers: KernelTimers = STEADY_TIMERS,
    ) -> CollectiveCost:
        """One of ``exchange``'s calls on every ring at once: the slowest ring's time, one node's wire bytes
        (``fresh``: on connections that never carried data, :func:`~netbench.model.gloo_tcp.gloo_time`; ``timers``:
        how the kernel's timers meet the call)."""
        if not exchange.moves_bytes:
            return CollectiveCost()
        nbytes = exchange.bytes_per_step / exchange.calls
        p = pattern(exchange.ring_kind, "ring", nbytes, self.peers)
        if p is None:
            return CollectiveCost()
        every = [price for ring in prices for price in ring]
        distinct = set(every)
        typical = median_low([price.path_bps for price in every if price.path_bps is not None] or [0])
        delay = median_low([price.pipeline_delay_s for price in every])
        uplink = median_low([price.uplink_bps or 0 for price in every])
        flow = flow_of(p, framing, typical or None, uplink or None, delay)
        wire = flow.forward + flow.reverse  # one node's, its ACKs (and a fan-out's probes) as on the median path
        rates = {price: p.critical_bytes / price.transfer_s(p, framing) for price in distinct}
        links = {
            price: Link(1.0, 1.0, price.pipeline_delay_s + overhead_s, one_way_s=price.pipeline_delay_s)
            for price in distinct
        }
        if exchange.collective == "all_reduce" and ring_operations("all_reduce", nbytes, self.peers)[0][1] <= 4:
            return max(
                (_chain(ring, nbytes, rates, links, p.hops, wire) for ring in set(map(tuple, prices))),
                key=lambda c: c.time_s,
            )
        times = {
            price: ring_time(
                exchange,
                self.peers,
                rates[price],
                links[price],
                framing,
                tcp,
                idle_s,
                paced_flight_bytes,
                cpu_work_s,
                fresh,
                max(data for data, _, _ in price.directions),
                timers,
            )
            for price in distinct
        }
        if exchange.ring_kind == "p2p_ring" and len(distinct) > 1:
            t = max(
                (_posted_hops(ring, times, links, p.hops) for ring in set(map(tuple, prices))), key=lambda t: t.time_s
            )
        else:
            t = max(times.values(), key=lambda t: t.time_s)
        return CollectiveCost(t.time_s, t.latency_s, t.transfer_s, wire, wire, p.hops)


class Mesh(RingSet):
    """Every ordered pair of each ring's ranks: the P (P - 1) flows of a collective in which every rank sends to each
    other at once (gloo's all_to_all), each ``1 / (P - 1)`` of a rank's call.

    Flows are grouped by class, a node's switch and access link: one representative hop per pair of classes stands
    for its flows, so thousands of nodes cost a few classes, not millions of pairs. Its flows leave every node of the
    source class and reach every node of the destination class evenly, and all of them cross the switches' route.
    """

    def __init__(self, routes: Routes, rings: Sequence[Sequence[int]]) -> None:
        self.routes = routes
        self.ranks = tuple(tuple(r) for r in rings)
        self.peers = len(self.ranks[0]) if self.ranks else 0
        self.share = 1.0 / max(1, self.peers - 1)
        self._flows: list[tuple[RingHop, int, tuple[int, ...], tuple[int, ...]]] = []
        for ranks in self.ranks:
            classes: dict[tuple, list[int]] = {}
            for node in ranks:
                access = routes.access[routes.topology.nodes[node].name]
                classes.setdefault((routes.topology.nodes[node].switch, access.forward, access.reverse), []).append(
                    node
                )
            for src in classes.values():
                for dst in classes.values():
                    same = src is dst
                    flows = len(src) * (len(dst) - 1 if same else len(dst))
                    if flows:
                        a, b = src[0], dst[1] if same else dst[0]
                        hop = RingHop(a, b, routes.path(a, b), routes.path(b, a))
                        self._flows.append((hop, flows, tuple(src), tuple(dst)))
        self.rings = tuple((hop,) for hop, *_ in self._flows)

    @cached_property
    def data(self) -> Counter[Hop]:
        return self._count(on_data=True)

    @cached_property
    def acks(self) -> Counter[Hop]:
        return self._count(on_data=False)

    def _count(self, on_data: bool) -> Counter[Hop]:
        out: Counter[Hop] = Counter()
        for _, path, n, data in self.crossings():
            if data == on_data:
                for h in path:
                    out[h] += n
        return out

    def crossings(self) -> Iterator[tuple[RingHop, tuple[Hop, ...], float, bool]]:
        """A class pair's flows: spread over its source nodes' uplinks and its destinations' downlinks (and back for
        the ACKs), all of them on the switches' route between."""
        for hop, flows, src, dst in self._flows:
            for path, first, last, on_data in ((hop.forward, src, dst, True), (hop.reverse, dst, src, False)):
                yield hop, tuple(self._access(node, path[0]) for node in first), flows / len(first), on_data
                yield hop, path[1:-1], flows, on_data
                yield hop, tuple(self._access(node, path[-1]) for node in last), flows / len(last), on_data

    def _access(self, node: int, like: Hop) -> Hop:
        """``node``'s access link, in the direction of ``like`` (an access hop of another node of its class)."""
        return Hop(self.routes.access[self.routes.topology.nodes[node].name].name, like.forward)


def _posted_hops(
    ring: tuple[HopPrice, ...], times: dict[HopPrice, GlooTime], links: dict[HopPrice, Link], hops: int
) -> GlooTime:
    """A ring of point-to-point hops, each receive posted a hop ahead, whose links differ (sites: LAN and WAN hops
    in turn), rank by rank: rank i issues hop k when hop k - 1 has arrived from its predecessor, and its send leaves
    when the successor's ready notification for hop k (posted when the successor issued hop k - 1) has crossed the
    link back and the previous send has left. ``ring[i]`` is the link from rank i to rank i + 1; each link's hop takes
    its one-way delay and overhead plus what a ring of that link alone spends per hop beyond them (transfer, window,
    pacing: :func:`~netbench.model.gloo_tcp.posted_ring_time_s`). With equal links this is that ring."""
    size = len(ring)
    latency = [links[price].alpha_s for price in ring]  # one-way delay + per-message overhead
    beyond = [max(0.0, (times[price].time_s - latency[i]) / hops - latency[i]) for i, price in enumerate(ring)]
    issued = [0.0] * size  # when each rank issued its current hop (its chunk in hand)
    posted = [0.0] * size  # when each rank posted the receive its predecessor's current hop waits for
    free = [0.0] * size  # when each rank's send of the previous hop has left
    arrived = [0.0] * size
    for _ in range(hops):
        begin = [max(issued[i], posted[(i + 1) % size] + latency[i], free[i]) for i in range(size)]
        free = [begin[i] + beyond[i] for i in range(size)]
        arrived = [free[(i - 1) % size] + latency[(i - 1) % size] for i in range(size)]  # from the predecessor
        posted = issued  # the next hop's receive was posted as the current hop was issued
        issued = arrived
    time = max(arrived)
    transfer = max(sum(times[price].transfer_s for price in ring) / size, 0.0)
    return GlooTime(time, max(0.0, time - transfer), transfer)


def _chain(
    ring: tuple[HopPrice, ...],
    nbytes: float,
    rates: dict[HopPrice, float],
    links: dict[HopPrice, Link],
    hops: int,
    wire: LinkBytes,
) -> CollectiveCost:
    """A tiny all-reduce's words passing 2(P - 1) consecutive hops (each hop twice but the two before the start).

    Equal terms are summed as a count times the term, so a ring of equal hops costs what gloo_time's chain says.
    """

    def term(price: HopPrice) -> tuple[float, float, float]:
        link = links[price]
        return price.forward_s, link.alpha_s - link.delay_s, rates[price]

    terms = [term(price) for price in ring]
    size = [chain_time_s(1, nbytes, *t) for t in terms]
    skip = min(range(len(ring)), key=lambda i: size[i] + size[(i + 1) % len(ring)])
    counts: Counter = Counter()
    for t in terms:
        counts[t] += 2
    counts[terms[skip]] -= 1
    counts[terms[(skip + 1) % len(ring)]] -= 1
    time = sum(chain_time_s(c, nbytes, *t) for t, c in counts.items() if c)
    latency = sum(c * (d + o) for (d, o, _), c in counts.items() if c)
    transfer = sum(c * nbytes / r for (_, _, r), c in counts.items() if c)
    return CollectiveCost(time, latency, transfer, wire, wire, hops)
