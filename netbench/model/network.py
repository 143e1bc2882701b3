"""One training step priced on a network graph: the only step model, which :func:`netbench.model.step.training_step`
(the function plan and run predictions both call) drives before applying the overlap rules.

A ring whose hops are all one class (a uniform star: plan's flat cluster) has a closed form
(:meth:`GraphModel.uniform`), which needs no graph of N nodes; every other graph is priced hop by hop.

Two layouts of the replication:

* ``flat``: one ring of every rank, in placement order (:mod:`netbench.model.rings` prices its hops);
* ``sites``: sharded within sites (as ``gpus_per_node`` shards within a node, :mod:`netbench.model.steptime`): the
  gradient is reduce-scattered and the result all-gathered around each site's LAN ring (a ring all-reduce's traffic),
  each node compresses its 1/K shard, and the scheme's exchanges run among one rank per site: K rings of S ranks, one
  per shard, carrying 1/K of the payload each and sharing the WAN links.

A synchronous step waits for its slowest node: compute and codec take ``compute_scale`` times as long there. What the
step reports per link direction is the model's bytes per step (data of the hops crossing it, ACKs of those coming
back), and :class:`Bottleneck` names the link direction or node that sets the step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from netbench.declarations.registry import spec
from netbench.dtypes import DTYPE_BYTES
from netbench.model.calibration import Calibration, cost_key
from netbench.model.collectives import CollectiveCost, Link, cost, flow_of, pattern
from netbench.model.exchange import Exchange, average_bytes_per_step, rests
from netbench.model.framing import FlowWire
from netbench.model.gloo_tcp import largest_flight_bytes
from netbench.model.node_clocks import Pair, PairPrice
from netbench.model.pairings import each_sync, sync_pairings
from netbench.model.rings import BACKWARD_RINGS, HopPrice, RingHop, RingSet, Routes
from netbench.model.schemes import Scheme
from netbench.model.steptime import Scenario, StepEstimate, dense_dtype, exchange_cost, per_step
from netbench.shapes import ParamShape, total_params
from netbench.topology.graph import Hop, Topology
from netbench.topology.link import DirectionSpec
from netbench.topology.presets import star

__all__ = [
    "Layout",
    "LAYOUTS",
    "Bottleneck",
    "GraphEstimate",
    "GraphModel",
    "UniformStar",
    "direction_name",
    "direction_of",
    "paced_flight_bytes",
]

Layout = Literal["flat", "sites"]
LAYOUTS: tuple[str, ...] = ("flat", "sites")


@dataclass(frozen=True)
class Bottleneck:
    """What sets the step: a link direction (``kind`` link) or a slow node, and its share of the step."""

    kind: Literal["link", "node"]
    name: str
    share: float
    text: str


@dataclass(frozen=True)
class GraphEstimate:
    """The step (the same record as the star's), bytes per link direction per step, and the bottleneck (None: the
    step alone was asked for, :func:`netbench.model.step.training_step`)."""

    step: StepEstimate
    layout: Layout
    link_bytes: dict[str, float]
    bottleneck: Bottleneck | None


def direction_name(topology: Topology, h: Hop) -> str:
    """``n3 up`` / ``n3 down`` for an access link, ``eu-west to ap-south`` for a trunk."""
    link = topology.link(h.link)
    if link.a not in topology.switches:
        return f"{link.a} {'up' if h.forward else 'down'}"
    return f"{link.a} to {link.b}" if h.forward else f"{link.b} to {link.a}"


def direction_of(topology: Topology, link: str, forward: bool) -> str:
    """:func:`direction_name` of a link direction given as trunks.csv names it (``link``, fwd or rev)."""
    return direction_name(topology, Hop(link, forward))


class GraphModel:
    """A topology with its ranks placed: its rings built once, priced for any scheme, workload and trunk rate."""

    def __init__(self, topology: Topology, placement: Sequence[int]) -> None:
        self.topology = topology
        self.placement = tuple(placement)
        self.routes = Routes(topology)
        self.flat = RingSet(self.routes, [self.placement])
        rank = {node: r for r, node in enumerate(self.placement)}
        groups = sorted(
            (sorted(members, key=rank.__getitem__) for members in topology.groups().values()), key=lambda g: rank[g[0]]
        )
        self.sites = groups
        self.slowest = max(range(topology.node_count), key=lambda i: topology.nodes[i].compute_scale)

    @classmethod
    def uniform(cls, machines: int, up_bps: float, down_bps: float, delay_s: float = 0.0) -> GraphModel:
        """A star of ``machines`` nodes whose access links are all alike (``delay_s``: one way between two nodes):
        its step in closed form, at any size (plan's 100,000 nodes) without building the graph.
        """
        return UniformStar(machines, up_bps, down_bps, delay_s)

    @classmethod
    def star_step(
        cls,
        scheme: Scheme,
        shapes: Sequence[ParamShape],
        scenario: Scenario,
        calibration: Calibration,
        params: int | None = None,
    ) -> StepEstimate:
        """One step on the star ``scenario`` describes (its machines, up, down and one-way delay): plan's flat
        cluster.
        """
        star = cls.uniform(scenario.machines, scenario.up_bps, scenario.down_bps, scenario.delay_s)
        return star.step(scheme, shapes, scenario, calibration, params)

    def step(
        self,
        scheme: Scheme,
        shapes: Sequence[ParamShape],
        scenario: Scenario,
        calibration: Calibration,
        params: int | None = None,
    ) -> StepEstimate:
        """One step of ``scheme`` on the flat ring (:meth:`estimate` without the per-link view)."""
        return self.estimate(scheme, shapes, scenario, calibration, params=params).step

    @property
    def slowest_scale(self) -> float:
        """How many times longer the slowest node computes than the nominal one (a synchronous step waits for it)."""
        return self.topology.nodes[self.slowest].compute_scale

    @property
    def per_site(self) -> int | None:
        """Nodes per site when every site has as many (the sharded layout needs it), else None."""
        sizes = {len(g) for g in self.sites}
        return sizes.pop() if len(sizes) == 1 and len(self.sites) > 1 else None

    def ring_link(self) -> tuple[float, float]:
        """(rate, round trip) one flat-ring hop sees at the ring's bottleneck: the least rate per data hop over the link
        directions the ring's data crosses (a shared trunk gives each hop its share), and the longest hop's round trip.

        For the star these are ``min(up, down)`` and twice the one-way delay: what bucket sizing takes from a link.
        """
        rings = self.flat
        rate = min(rings.rate_bps(h) / n for h, n in rings.data.items())
        rtt = max(
            self.routes.delay_s(hop.forward) + self.routes.delay_s(hop.reverse) for ring in rings.rings for hop in ring
        )
        return rate, rtt

    def layout_rings(self, layout: Layout) -> tuple[RingSet | None, RingSet]:
        """(the site LAN rings or None, the rings the scheme's exchanges run on)."""
        if layout == "flat":
            return None, self.flat
        k = self.per_site
        if k is None:
            raise ValueError("sharding within sites needs at least two sites with the same number of nodes")
        intra = RingSet(self.routes, self.sites) if k > 1 else None
        return intra, RingSet(self.routes, [[g[j] for g in self.sites] for j in range(k)])

    def estimate(
        self,
        scheme: Scheme,
        shapes: Sequence[ParamShape],
        scenario: Scenario,
        calibration: Calibration,
        layout: Layout = "flat",
        trunk_scale: float = 1.0,
        params: int | None = None,
        steps: Sequence[int] | None = None,
    ) -> GraphEstimate:
        """Model one step of ``scheme`` on ``shapes`` (``scenario``: compute, framing, TCP; its links come from the
        graph).

        A scheme that pairs its ranks afresh each sync (gossip) is priced at each distinct pairing of the syncs among
        ``steps`` (1-based: a run's measured steps), each pair a ring of two, the pairings averaged by how many syncs
        drew them (:func:`netbench.model.pairings.sync_pairings`; without steps, the pairing's expectation).
        """
        g = scenario.gpus_per_node
        if scenario.algorithm != "ring" or (g > 1 and layout != "flat"):
            raise ValueError(
                "a topology is modelled with gloo's ring, and sharded within sites with one accelerator per node"
            )
        n_params = total_params(list(shapes)) if params is None else params
        intra_rings, rings = self.layout_rings(layout)
        k = len(rings.rings)
        exchanges = tuple(_sharded(ex, k) for ex in scheme.exchanges(shapes, rings.peers))
        draws = self._draws(scheme, rings, layout, exchanges, steps)
        # each of a shard's (site layout) or a machine's (G accelerators) ranks encodes its own slice
        compression = self._codec_s(scheme, calibration, n_params / (k * g), len(shapes))
        compute = scenario.compute_s * self.topology.nodes[self.slowest].compute_scale
        peers = draws[0][1].peers  # every draw's rings are alike in size: two ranks a pair
        paced = paced_flight_bytes((*exchanges, *scheme.ended(shapes, peers)), peers)
        wire, by_price, loads = CollectiveCost(), {}, {}
        for weight, drawn, since in draws:
            cost_here, alone = self._wire(
                exchanges,
                drawn,
                trunk_scale,
                scenario,
                calibration,
                compute + compression,
                compression,
                paced,
                since,
                steps if drawn is rings else None,  # the layout's rings; a pairing's draws say when their pairs met
            )
            wire = wire + cost_here.scaled(weight)
            for price, t in alone.items():
                by_price[price] = by_price.get(price, 0.0) + weight * t
            for h, b in _link_bytes(drawn, exchanges, scenario).items():
                loads[h] = loads.get(h, 0.0) + weight * b
        intra, intra_ex = self.within_sites(scheme, n_params, intra_rings, scenario, calibration, trunk_scale)
        machine = _within_machine(scheme, n_params, scenario, calibration)
        comm = wire.time_s + intra.time_s + machine
        step = compression + max(compute, comm) if scheme.overlap else compute + compression + comm
        view = self._scenario(scenario, by_price, layout, k)
        if intra_rings is not None:  # a site's LAN ring crosses the same access links: a node's wire carries both
            wire = replace(wire, tx=wire.tx + intra.tx, rx=wire.rx + intra.rx)
        est = StepEstimate(
            scheme=scheme.name,
            scenario=view,
            params=n_params,
            exchanges=exchanges,
            payload_bytes_per_step=average_bytes_per_step(exchanges),
            wire=wire,
            comm_time_s=comm,
            intra_time_s=intra.time_s + machine,
            compression_time_s=compression,
            compute_time_s=compute,
            step_time_s=step,
            overlap=scheme.overlap,
        )
        if intra_rings is not None:
            for h, b in _link_bytes(intra_rings, intra_ex, scenario).items():
                loads[h] = loads.get(h, 0.0) + b
        named = {direction_name(self.topology, h): b for h, b in sorted(loads.items(), key=lambda kv: -kv[1])}
        bottleneck = self._bottleneck(est, [r for _, r, _ in draws], by_price, intra, trunk_scale)
        return GraphEstimate(est, layout, named, bottleneck)

    def _codec_s(self, scheme: Scheme, calibration: Calibration, params: float, tensors: int) -> float:
        """:func:`_codec_time_s` at the slowest node's speed."""
        return _codec_time_s(scheme, calibration, params, tensors) * self.topology.nodes[self.slowest].compute_scale

    def pair_prices(
        self,
        scheme: Scheme,
        shapes: Sequence[ParamShape],
        scenario: Scenario,
        calibration: Calibration,
        steps: Sequence[int],
    ) -> dict[int, dict[Pair, PairPrice]]:
        """Per sync among ``steps`` (1-based) of a scheme that pairs its ranks each sync, each pair's exchange as
        :func:`~netbench.model.node_clocks.replay_clocks` shares it (ranks as placed; empty for any other scheme).

        A pair is priced as a ring of two alone on the graph (``T1``) and as two such rings sharing every link it
        crosses (``T2``): the model's own price for a shared link, so its wire alone is ``T2 - T1`` and the rest,
        ``2 T1 - T2``, is what sharing leaves as it is. The connection's history (a first meeting, a rest over other
        syncs) is the sync's, as :meth:`estimate` prices it."""
        pairing = spec(scheme.name).pairing
        rings = self.flat
        exchanges = tuple(scheme.exchanges(shapes, rings.peers))
        if pairing is None or not exchanges:
            return {}
        compression = self._codec_s(scheme, calibration, total_params(list(shapes)), len(shapes))
        idle = scenario.compute_s * self.topology.nodes[self.slowest].compute_scale + compression
        paced = paced_flight_bytes((*exchanges, *scheme.ended(shapes, 2)), 2)
        period = exchanges[0].period  # the pairing's exchange: its per-step cost times its period is one sync's
        syncs = each_sync(pairing, scheme.config, len(self.placement), exchanges[0], steps)
        priced: dict[tuple[Pair, int], PairPrice] = {}
        out: dict[int, dict[Pair, PairPrice]] = {}
        for step, (pairs, since) in syncs.items():
            out[step] = {}
            for a, b in (p for p in pairs if p[0] != p[1]):
                if ((a, b), since) not in priced:
                    ends = [self.placement[a], self.placement[b]]
                    alone, twice = RingSet(self.routes, [ends]), RingSet(self.routes, [ends, ends])
                    t1, t2 = (
                        self._wire(exchanges, r, 1.0, scenario, calibration, idle, compression, paced, since)[0].time_s
                        * period
                        for r in (alone, twice)
                    )
                    wire = max(0.0, t2 - t1)
                    links = frozenset(h for h, n in alone.data.items() if n)
                    priced[(a, b), since] = PairPrice(max(0.0, t1 - wire), wire, links)
                out[step][a, b] = priced[(a, b), since]
        return out

    def _draws(
        self,
        scheme: Scheme,
        rings: RingSet,
        layout: Layout,
        exchanges: Sequence[Exchange],
        steps: Sequence[int] | None,
    ) -> list[tuple[float, RingSet, int]]:
        """(weight, rings, since) to price the exchanges on: the layout's rings, or, for a scheme that pairs its ranks
        each sync (its declaration's ``pairing``) on the flat layout, each distinct pairing of the syncs, a ring of two
        per pair (``since``: how many syncs ago its pairs last exchanged, 0 for some pair's first exchange in the run,
        :func:`~netbench.model.pairings.sync_pairings`; 1 for the layout's rings, which exchange every sync)."""
        pairing = spec(scheme.name).pairing
        if pairing is None or layout != "flat" or not exchanges:
            return [(1.0, rings, 1)]
        drawn = sync_pairings(pairing, scheme.config, len(self.placement), exchanges[0], steps)
        place = self.placement
        return [(w, RingSet(self.routes, [[place[a], place[b]] for a, b in pairs]), since) for w, pairs, since in drawn]

    def _wire(
        self,
        exchanges: Sequence[Exchange],
        layout_rings: RingSet,
        trunk_scale: float,
        scenario: Scenario,
        calibration: Calibration,
        idle: float,
        codec: float,
        paced: float,
        since: int = 1,
        steps: Sequence[int] | None = None,
    ) -> tuple[CollectiveCost, dict[HopPrice, float]]:
        """The exchanges' cost on ``layout_rings`` (each on what its kind runs on: the rings, or their mesh) as the
        uniform ring's closed form sums it, and each hop's alone; ``paced``: the largest burst the connections have
        carried (:func:`paced_flight_bytes`); ``since``: how many syncs ago the connections last carried this exchange
        (0: never, so they start from TCP's initial window; a pairwise exchange makes one call a sync). Connections
        that rested over ``since - 1`` other syncs rest ``since`` periods of local work and those syncs' calls, each
        priced as this one on a warm connection, before their first call: a restart after idle where TCP makes one.
        Rings that exchange every sync (``since`` 1) carry data for the first time at the first sync of the run's
        earliest exchange (:func:`_opening_exchange`; the others' first syncs find connections it warmed): where
        ``steps`` (1-based, a run's measured steps) hold that sync, its first call is priced on connections that never
        carried data, the sync's share of that exchange's syncs among ``steps`` (:func:`first_sync_share`).
        """
        wire = CollectiveCost()
        alone: dict[HopPrice, float] = {}
        fresh, timers = since == 0, scenario.timers
        opener = _opening_exchange(exchanges) if since == 1 else None
        for ex, first_rest in zip(exchanges, rests(exchanges, idle)):
            opening = first_sync_share(ex, steps) if ex is opener else 0.0
            overhead = calibration.overhead(ex.collective)
            rings = layout_rings.for_kind(ex.ring_kind)
            prices = rings.prices(trunk_scale)
            if since > 1 and first_rest is not None:
                warm = rings.call_cost(
                    ex, prices, overhead, scenario.framing, scenario.tcp, first_rest, paced, codec, False, timers
                )
                first_rest = since * ex.period * idle + (since - 1) * warm.time_s

            def cost_on(
                ps, rest: float | None, ex=ex, overhead=overhead, rings=rings, opening=opening
            ) -> CollectiveCost:
                def call(i: float | None, new: bool = fresh) -> CollectiveCost:
                    return rings.call_cost(
                        ex, ps, overhead, scenario.framing, scenario.tcp, i, paced, codec, new, timers
                    )

                warm = per_step(ex, call, rest, idle)
                if not opening:
                    return warm
                first = per_step(ex, _first_call_fresh(call), rest, idle)
                return warm.scaled(1.0 - opening) + first.scaled(opening)

            wire = wire + cost_on(prices, first_rest)
            for price in {p for ring in prices for p in ring}:  # the ring as if every hop were this one
                alone[price] = alone.get(price, 0.0) + cost_on([[price] * rings.peers], first_rest).time_s
        return wire, alone

    def within_sites(
        self,
        scheme: Scheme,
        n_params: int,
        intra_rings: RingSet | None,
        scenario: Scenario,
        calibration: Calibration,
        trunk_scale: float,
    ) -> tuple[CollectiveCost, tuple[Exchange, ...]]:
        """Reduce-scatter and all-gather of the dense gradient around every site's LAN ring at once."""
        if intra_rings is None:
            return CollectiveCost(), ()
        dense = Exchange("all_reduce", n_params * DTYPE_BYTES[dense_dtype(scheme)], label="within site")
        cost = intra_rings.call_cost(
            dense,
            intra_rings.prices(trunk_scale),
            calibration.overhead("all_reduce"),
            scenario.framing,
            scenario.tcp,
            0.0,
            0.0,
            0.0,
            timers=scenario.timers,
        )
        return cost, (dense,)

    def _scenario(self, scenario: Scenario, by_price: dict[HopPrice, float], layout: Layout, k: int) -> Scenario:
        """The scenario as reports read it: the graph's nodes, and (beyond the star) the slowest hop's rate and
        delay.
        """
        update: dict = {"workers": self.topology.node_count * scenario.gpus_per_node}
        if by_price and self.topology.kind != "star":
            worst = max(by_price, key=by_price.__getitem__)
            rate = min(r / max(d, a, 1) for d, a, r in worst.directions)
            update |= {"up_bps": rate, "down_bps": rate, "delay_s": worst.pipeline_delay_s}
        if layout == "sites" and k > 1:
            update |= {
                "gpus_per_node": k,
                "intra_bits_per_s": min(
                    self.topology.direction(h).rate_bps for g in self.sites for h in self.routes.path(g[0], g[1])
                ),
            }
        return scenario.model_copy(update=update)

    def _bottleneck(
        self,
        est: StepEstimate,
        drawn: Sequence[RingSet],
        by_price: dict[HopPrice, float],
        intra: CollectiveCost,
        trunk_scale: float,
    ) -> Bottleneck:
        step = est.step_time_s or 1.0
        node = self.topology.nodes[self.slowest]
        local = est.compute_time_s + est.compression_time_s
        node_pick = Bottleneck(
            "node",
            node.name,
            local / step,
            f"node {node.name} computes {node.compute_scale:.1f}x: {100 * local / step:.0f} % of the step",
        )
        if not by_price:
            return node_pick
        worst = max(by_price, key=by_price.__getitem__)
        rings, hop = next(
            (rs, hop)
            for rs in (*drawn, *(d.mesh for d in drawn))
            for ring in rs.rings
            for hop in ring
            if rs.price(hop, trunk_scale) == worst
        )
        h = _binding(rings, hop, trunk_scale)
        name = direction_name(self.topology, h)
        share = est.wire.time_s / step
        link_pick = Bottleneck(
            "link", name, share, f"the {name} link carries {rings.carries(h)}: {100 * share:.0f} % of the step"
        )
        if intra.time_s > est.wire.time_s:
            return Bottleneck(
                "link",
                "site LANs",
                intra.time_s / step,
                f"the site LANs' reduce-scatter and all-gather: {100 * intra.time_s / step:.0f} % of the step",
            )
        return node_pick if node.compute_scale > 1 and local > est.wire.time_s else link_pick


class UniformStar(GraphModel):
    """:meth:`GraphModel.uniform`: every ring hop one class, so :meth:`step` is the closed form; the star's graph is
    built only where a caller asks for what needs it (bytes per link, the bottleneck).
    """

    def __init__(self, machines: int, up_bps: float, down_bps: float, delay_s: float) -> None:
        self.machines, self.up_bps, self.down_bps, self.delay_s = machines, up_bps, down_bps, delay_s
        self._built = False

    @property
    def slowest_scale(self) -> float:
        return 1.0  # every node alike

    def _links(self, scenario: Scenario) -> Scenario:
        """``scenario`` with this star's links and machines (unchanged, the same object, where they agree)."""
        links = {"up_bps": self.up_bps, "down_bps": self.down_bps, "delay_s": self.delay_s}
        if scenario.machines != self.machines:
            links["workers"] = self.machines * scenario.gpus_per_node
        if all(getattr(scenario, k) == v for k, v in links.items()):
            return scenario
        return scenario.model_copy(update=links)

    def step(
        self,
        scheme: Scheme,
        shapes: Sequence[ParamShape],
        scenario: Scenario,
        calibration: Calibration,
        params: int | None = None,
    ) -> StepEstimate:
        return _uniform_ring(scheme, shapes, self._links(scenario), calibration, params)

    def estimate(
        self,
        scheme: Scheme,
        shapes: Sequence[ParamShape],
        scenario: Scenario,
        calibration: Calibration,
        layout: Layout = "flat",
        trunk_scale: float = 1.0,
        params: int | None = None,
        steps: Sequence[int] | None = None,
    ) -> GraphEstimate:
        if not self._built:  # the delay on the uplinks: a star's one-way delay is up's plus down's
            up = DirectionSpec(rate_bps=self.up_bps, delay_s=self.delay_s)
            GraphModel.__init__(
                self, star(self.machines, up, DirectionSpec(rate_bps=self.down_bps)), range(self.machines)
            )
            self._built = True
        return super().estimate(scheme, shapes, self._links(scenario), calibration, layout, trunk_scale, params, steps)


def _binding(rings: RingSet, hop: RingHop, trunk_scale: float) -> Hop:
    """The direction the hop crosses (its data or its ACKs) with the least rate per data hop, then the most delay."""
    crossed = [h for h in (*hop.forward, *hop.reverse) if rings.data[h]]
    return min(
        crossed,
        key=lambda h: (rings.rate_bps(h, trunk_scale) / rings.data[h], -rings.routes.topology.direction(h).delay_s),
    )


def first_sync_share(ex: Exchange, steps: Sequence[int] | None) -> float:
    """The share of ``ex``'s syncs among ``steps`` (1-based) that is its first sync of the run, the one whose first call
    finds the connections without data ever carried (0 where ``steps`` are not given or do not hold it)."""
    if not steps or not ex.moves_bytes:
        return 0.0
    first = ex.first_sync
    syncs = [s for s in steps if s >= first and (s - first) % ex.period == 0]
    return 1.0 / len(syncs) if first in syncs else 0.0


def _opening_exchange(exchanges: Sequence[Exchange]) -> Exchange | None:
    """The exchange whose first sync is the run's first call on its rings (the earliest; of those on one step, the
    first issued)."""
    moving = [ex for ex in exchanges if ex.moves_bytes]
    return min(moving, key=lambda ex: ex.first_sync) if moving else None


def _first_call_fresh(call: Callable[[float | None, bool], CollectiveCost]) -> Callable[[float | None], CollectiveCost]:
    """``call`` whose first use prices connections that never carried data, the later ones as they are."""
    used: list[bool] = []

    def once(idle: float | None) -> CollectiveCost:
        new = not used
        used.append(True)
        return call(idle, True) if new else call(idle)

    return once


def paced_flight_bytes(exchanges: Sequence[Exchange], peers: int) -> float:
    """The largest burst one connection carries in the exchanges' calls among ``peers``: what sets bbr's pacing rate,
    which it never lowers (:func:`~netbench.model.gloo_tcp.bbr_rate_Bps`). The exchanges of a phase that has ended
    (1-bit Adam's dense warm-up) count: the connections carried their bursts before the steps priced."""
    return max(
        (
            largest_flight_bytes(ex.ring_kind, ex.bytes_per_step / ex.calls, peers)
            for ex in exchanges
            if ex.calls and ex.collective != "none"
        ),
        default=0.0,
    )


def _sharded(ex: Exchange, k: int) -> Exchange:
    """One shard's exchange: 1/k of the bytes (rounded up), the same calls."""
    if k <= 1:
        return ex
    return replace(ex, bytes_per_step=-(-ex.bytes_per_step // k))


def _link_bytes(layout_rings: RingSet, exchanges: Sequence[Exchange], scenario: Scenario) -> dict[Hop, float]:
    """Bytes per step on each link direction: the data of the ring hops (a mesh's flows) crossing it, the ACKs of
    those coming back."""
    out: dict[Hop, float] = {}
    for ex in exchanges:
        if not ex.moves_bytes:
            continue
        rings = layout_rings.for_kind(ex.ring_kind)
        p = pattern(ex.ring_kind, "ring", ex.bytes_per_step / ex.calls, rings.peers)
        if p is None:
            continue
        per_step_calls = rings.share * ex.calls / ex.period
        backward = ex.ring_kind in BACKWARD_RINGS
        flows: dict[RingHop, FlowWire] = {}
        for hop, path, n, on_data in rings.crossings():
            if hop not in flows:
                flows[hop] = flow_of(
                    p, scenario.framing, rings.path_bps(hop, backward), rings.uplink_bps(hop), rings.mean_delay_s(hop)
                )
            b = per_step_calls * n * (flows[hop].forward if on_data != backward else flows[hop].reverse).total
            for h in path:
                out[h] = out.get(h, 0.0) + b
    return out


def _codec_time_s(scheme: Scheme, calibration: Calibration, params: float, tensors: int) -> float:
    """One rank's encode and decode of ``params`` parameters in ``tensors`` tensors with this scheme's settings (a
    per-parameter and a per-tensor cost, as run predictions use); 0 for a scheme without a codec."""
    if not scheme.runs_codec:
        return 0.0
    return sum(calibration.encode_decode_s(cost_key(scheme.config), params, tensors))


def _uniform_ring(
    scheme: Scheme,
    shapes: Sequence[ParamShape],
    scenario: Scenario,
    calibration: Calibration,
    params: int | None = None,
) -> StepEstimate:
    """One step of ``scheme`` on a ring whose hops are all one class (``scenario``'s up, down and delay): the closed
    form :meth:`GraphModel.estimate` reaches on a uniform star, without building its nodes; with ``gpus_per_node`` G
    > 1 the scheme runs among the N/G machines and the dense gradient is all-reduced within each machine.
    """
    n_params = total_params(list(shapes)) if params is None else params
    peers = scenario.machines
    exchanges = scheme.exchanges(shapes, peers) if peers >= 2 else ()
    wire = CollectiveCost()
    g = scenario.gpus_per_node
    compression = _codec_time_s(scheme, calibration, n_params / g, len(shapes))
    idle = scenario.compute_s + compression  # the links rest while a node computes and compresses
    paced = paced_flight_bytes((*exchanges, *scheme.ended(shapes, peers)), peers) if peers >= 2 else 0.0
    for ex, rest in zip(exchanges, rests(exchanges, idle)):
        alpha = scenario.delay_s + calibration.overhead(ex.collective)
        link = Link(scenario.up_bps, scenario.down_bps, alpha, one_way_s=scenario.delay_s)
        wire = wire + exchange_cost(
            ex,
            peers,
            link,
            scenario.framing,
            scenario.algorithm,
            scenario.tcp,
            rest,
            paced,
            compression,
            idle,
            scenario.timers,
        )
    intra = _within_machine(scheme, n_params, scenario, calibration)
    comm = wire.time_s + intra
    if scheme.overlap:
        step = compression + max(scenario.compute_s, comm)
    else:
        step = scenario.compute_s + compression + comm
    return StepEstimate(
        scheme=scheme.name,
        scenario=scenario,
        params=n_params,
        exchanges=tuple(exchanges),
        payload_bytes_per_step=average_bytes_per_step(exchanges),
        wire=wire,
        comm_time_s=comm,
        intra_time_s=intra,
        compression_time_s=compression,
        compute_time_s=scenario.compute_s,
        step_time_s=step,
        overlap=scheme.overlap,
    )


def _within_machine(scheme: Scheme, n_params: int, scenario: Scenario, calibration: Calibration) -> float:
    """The dense gradient's reduce-scatter and all-gather among a machine's G accelerators on the intra-node link
    (a ring all-reduce's traffic, every step); 0 with one accelerator per machine.
    """
    g = scenario.gpus_per_node
    if g <= 1:
        return 0.0
    dense = n_params * DTYPE_BYTES[dense_dtype(scheme)]
    fast = Link(scenario.intra_bits_per_s or 0.0, scenario.intra_bits_per_s or 0.0, calibration.overhead("all_reduce"))
    return cost(pattern("all_reduce", "ring", dense, g), fast, scenario.framing).time_s
