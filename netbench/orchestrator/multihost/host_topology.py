"""A topology on real hosts: which node this host runs, and the path to every peer as one class of its egress.

Each host runs one node (torchrun rank r, or the G local ranks of one node with ``--shard-within host``,
is node ``place(topology, order)[r // G]``) and shapes only its own egress, per destination: traffic
to a peer's addresses gets the path from this node to that peer's node, its rate the path's
bottleneck and its delay the sum along the path (:mod:`netbench.emulation.htb`).

What per-host classes cannot do: a link that several hosts' paths share (a WAN trunk, a rack
uplink, a peer's downlink) is held to its rate only per sender. Each sender's class alone stays
within the trunk's rate, but two hosts sending across one trunk at once get up to twice its rate,
where the emulator's trunk would split it. A ring placed site by site crosses each trunk direction
with one flow, which this reproduces; interleaved placements and all-to-all traffic overstate the
trunks. A host's own uplink is exact: all its peer classes together borrow from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netbench.emulation.htb import HtbShaping, PeerClass
from netbench.topology.graph import Topology
from netbench.topology.link import DirectionSpec
from netbench.topology.placement import place


class HostTopologyError(ValueError):
    """A topology that cannot be shaped onto these hosts; one line."""


def path_direction(topology: Topology, src: int, dst: int) -> DirectionSpec:
    """The path from node ``src`` to node ``dst`` as one link direction: bottleneck rate, summed delay, jitter added in
    quadrature (independent per hop), loss compounded. ValueError where it exceeds what one direction takes.
    """
    hops = [topology.direction(h) for h in topology.path(src, dst)]
    survive = math.prod(1 - h.loss for h in hops)
    return DirectionSpec(
        rate_bps=min(h.rate_bps for h in hops),
        delay_s=sum(h.delay_s for h in hops),
        jitter_s=math.sqrt(sum(h.jitter_s**2 for h in hops)),
        loss=1 - survive,
    )


@dataclass(frozen=True)
class HostTopology:
    """The topology as placed on torchrun's ranks, and this host's node in it."""

    topology: Topology
    placement: tuple[int, ...]  # topology node of each node rank
    gpus_per_node: int  # local ranks per node (G): rank r belongs to node rank r // G
    node: int  # this host's topology node
    shaped: bool = True  # False: the hosts' own links as they are (a star at the NIC's rate), nothing shaped

    @classmethod
    def for_rank(
        cls, topology: Topology, order: str | tuple[int, ...], world_size: int, gpus_per_node: int, rank: int
    ) -> HostTopology:
        """Check the topology against the world torchrun started; HostTopologyError (one line) otherwise."""
        nodes = world_size // gpus_per_node
        if topology.node_count != nodes:
            per = f" ({world_size} ranks, {gpus_per_node} per node)" if gpus_per_node > 1 else ""
            raise HostTopologyError(
                f"--topology: {topology.node_count} nodes, but torchrun started {nodes}{per}; "
                "a real run needs one host per topology node"
            )
        placement = place(topology, order)
        return cls(topology, placement, gpus_per_node, placement[rank // gpus_per_node])

    def paths(self) -> dict[int, DirectionSpec]:
        """The path from this node to every other node; HostTopologyError where one cannot be shaped."""
        found = {}
        for other in range(self.topology.node_count):
            if other == self.node:
                continue
            try:
                found[other] = path_direction(self.topology, self.node, other)
            except ValueError as exc:
                first = str(exc).splitlines()[-1].strip()
                raise HostTopologyError(
                    f"--topology: the path {self.name(self.node)} -> {self.name(other)} cannot be "
                    f"shaped on one host's egress ({first})"
                ) from None
        return found

    def uniform_egress(self) -> DirectionSpec | None:
        """This host's uplink where the path to every peer is exactly that uplink: the star, or any one-switch graph
        whose other links neither slow, delay nor drop what it sends. One egress shaper (tbf) then gives every path,
        without knowing the peers' addresses; None where the paths differ (a class per peer: :meth:`shaping`).
        """
        access = self.topology.access_link(self.node)
        up = access.forward
        for other in range(self.topology.node_count):
            if other == self.node:
                continue
            for hop in self.topology.path(self.node, other):
                if hop.link == access.name and hop.forward:
                    continue
                beyond = self.topology.direction(hop)
                if beyond.rate_bps < up.rate_bps or beyond.impaired:
                    return None
        return up

    def name(self, node: int) -> str:
        return self.topology.nodes[node].name

    def leaders(self) -> list[int]:
        """The rank that speaks for each node (its local rank 0): rank r with r % G == 0."""
        return list(range(0, len(self.placement) * self.gpus_per_node, self.gpus_per_node))

    def node_of_rank(self, rank: int) -> int:
        return self.placement[rank // self.gpus_per_node]

    def shaping(self, addresses: dict[int, list[str]], own: set[str]) -> HtbShaping:
        """This host's per-peer tree from the leaders' addresses (by rank); HostTopologyError on an address two nodes
        claim.
        """
        paths = self.paths()
        owner: dict[str, int] = {}
        for rank, listed in sorted(addresses.items()):
            node = self.node_of_rank(rank)
            for address in listed:
                if address in own or node == self.node:
                    continue
                if owner.setdefault(address, node) != node:
                    raise HostTopologyError(
                        f"--topology: nodes {self.name(owner[address])} and {self.name(node)} both "
                        f"list address {address}; each node needs a host (and an address) of its own"
                    )
        peers = tuple(
            PeerClass(node=self.name(node), addresses=tuple(a for a, n in owner.items() if n == node), path=paths[node])
            for node in sorted(set(owner.values()))
        )
        if not peers:
            raise HostTopologyError("--topology: no peer has an address of its own; every node shares this host's")
        uplink = self.topology.access_link(self.node).forward
        return HtbShaping(node=self.name(self.node), uplink=uplink, peers=peers)
