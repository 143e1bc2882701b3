"""A topology built for real: a namespace per switch, a veth per link, and routes along the graph's paths.

Every switch routes as the star's switch does (:mod:`netbench.emulation.cluster`): a /32 route per node and proxy
ARP on every port, so the nodes still share one /24 with no route out. A node behind another switch is routed out of
the port toward the next hop of :meth:`~netbench.topology.graph.Topology.switch_path`, a trunk whose far switch
answers ARP for it; traffic between two nodes therefore crosses exactly the links of their path, and two flows that
cross one trunk share its rate. Each direction of each link is shaped on the egress it leaves by (node: its uplink;
switch port: the node's downlink; trunk end: the direction leaving that switch).

Names: switch ``k`` of ``topology.switches`` lives in :meth:`RunNames.fabric_switch_namespace` (the first one is the
star's switch namespace), node ``i``'s port is ``p{i}`` in its switch's namespace, trunk ``t`` is ``t{t}`` at both ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from pyroute2 import IPRoute

from netbench.emulation import netns
from netbench.emulation.naming import MAX_SWITCHES, RunNames
from netbench.topology.graph import Hop, Topology
from netbench.topology.link import DirectionSpec

__all__ = ["Port", "Fabric", "join", "PORT_SYSCTLS"]

PORT_SYSCTLS = {  # per port, once it exists (a namespace other than the host's has no neigh "default")
    "net.ipv4.conf.{port}.proxy_arp": "1",
    "net.ipv4.neigh.{port}.proxy_delay": "0",  # else proxy replies wait up to 0.8 s
}


@dataclass(frozen=True)
class Port:
    """One switch-side interface: which switch holds it, the link it belongs to, and the direction that leaves by it."""

    switch: int
    name: str
    link: str
    egress_forward: bool  # False for a node's port (its downlink leaves there); for a trunk, True at its a end

    @property
    def egress(self) -> Hop:
        return Hop(self.link, self.egress_forward)

    @property
    def ingress(self) -> Hop:
        return Hop(self.link, not self.egress_forward)


@dataclass(frozen=True)
class Fabric:
    """Where every port of a topology sits and where every switch routes each node (pure data, no namespace)."""

    graph: Topology
    names: RunNames

    def __post_init__(self) -> None:
        if len(self.graph.switches) > MAX_SWITCHES:
            raise ValueError(f"at most {MAX_SWITCHES} switches may be emulated, got {len(self.graph.switches)}")

    @cached_property
    def switch_index(self) -> dict[str, int]:
        return {name: k for k, name in enumerate(self.graph.switches)}

    def switch_of(self, node: int) -> int:
        return self.switch_index[self.graph.nodes[node].switch]

    def netns(self, switch: int) -> str:
        return self.names.fabric_switch_netns(switch)

    @cached_property
    def node_ports(self) -> tuple[Port, ...]:
        """Node ``i``'s port (index ``i``) in its switch."""
        return tuple(
            Port(self.switch_of(i), self.names.port(i), self.graph.access_link(i).name, False)
            for i in range(self.graph.node_count)
        )

    @cached_property
    def trunk_ports(self) -> tuple[tuple[Port, Port], ...]:
        """Both ends of every trunk (a end, b end), in the graph's trunk order."""
        return tuple(
            (
                Port(self.switch_index[t.a], self.names.trunk_port(k), t.name, True),
                Port(self.switch_index[t.b], self.names.trunk_port(k), t.name, False),
            )
            for k, t in enumerate(self.graph.trunks)
        )

    def ports_of(self, switch: int) -> list[Port]:
        ends = [end for pair in self.trunk_ports for end in pair]
        return [p for p in (*self.node_ports, *ends) if p.switch == switch]

    def routes(self, switch: int) -> dict[str, str]:
        """Node address -> the port of ``switch`` its packets leave by (the first hop of the graph's path)."""
        by_link = {(p.link, p.egress_forward): p.name for p in self.ports_of(switch)}
        name = self.graph.switches[switch]
        out = {}
        for i, node in enumerate(self.graph.nodes):
            first = self.graph.switch_path(name, node.name)[0]
            out[self.names.address(i)] = by_link[(first.link, first.forward)]
        return out

    def delayed_ports(self, switch: int) -> tuple[dict[str, DirectionSpec], dict[str, DirectionSpec]]:
        """The delay line's ports in ``switch``: (in from a node's uplink, out on any egress), impaired ones only.

        Each direction of each link is delayed once, in the switch it enters (a node's uplink) or leaves (a downlink,
        a trunk direction), so a packet waits the sum over its path, as the model adds it up.
        """
        up, down = {}, {}
        for port in self.ports_of(switch):
            ingress, egress = self.graph.direction(port.ingress), self.graph.direction(port.egress)
            if port in self.node_ports and ingress.impaired:
                up[port.name] = ingress
            if egress.impaired:
                down[port.name] = egress
        return up, down

    def shaped(self) -> list[tuple[int, str, DirectionSpec, str]]:
        """Every switch-side egress: (switch, port, its direction, run.json's label ``link:fwd|rev``)."""
        return [
            (p.switch, p.name, self.graph.direction(p.egress), p.egress.label)
            for k in range(len(self.graph.switches))
            for p in self.ports_of(k)
        ]

    def describe(self) -> dict:
        """What run.json records: each switch's namespace and ports, and each trunk's two ends."""
        return {
            "switches": {
                name: {
                    "netns": self.netns(k),
                    "address": self.names.fabric_switch_address(k),
                    "ports": [p.name for p in self.ports_of(k)],
                }
                for k, name in enumerate(self.graph.switches)
            },
            "trunks": {
                a.link: {"port": a.name, "a": self.netns(a.switch), "b": self.netns(b.switch)}
                for a, b in self.trunk_ports
            },
        }


def join(fabric: Fabric, call: Callable[..., dict[str, int]]) -> list[dict[str, int]]:
    """Create every trunk's veth, then in each switch bring its trunk ends up and route every node.

    ``call(k, fn, *args)`` runs ``fn`` in switch ``k``'s namespace. Returns each switch's trunk port ifindexes.
    """
    for a, b in fabric.trunk_ports:
        call(a.switch, _create_trunk, a.name, b.name, fabric.netns(b.switch))
    found = []
    for k in range(len(fabric.graph.switches)):
        trunk_ends = [p.name for p in fabric.ports_of(k) if p not in fabric.node_ports]
        found.append(call(k, _route_switch, trunk_ends, fabric.routes(k)))
    return found


def _create_trunk(port: str, peer: str, peer_netns: str) -> None:
    with IPRoute() as ipr, netns.open_fd(peer_netns) as peer_fd:
        ipr.link("add", ifname=port, kind="veth", peer={"ifname": peer, "net_ns_fd": peer_fd})


def _route_switch(trunk_ends: list[str], routes: dict[str, str]) -> dict[str, int]:
    """Trunk ends up with proxy ARP; a /32 per node out of its port (the node ports' own routes are replaced alike)."""
    ifindex = {}
    with IPRoute() as ipr:
        for port in trunk_ends:
            ifindex[port] = ipr.link_lookup(ifname=port)[0]
            netns.write_sysctls({key.format(port=port): value for key, value in PORT_SYSCTLS.items()})
            ipr.link("set", index=ifindex[port], state="up")
        for address, port in routes.items():
            index = ifindex.get(port) or ipr.link_lookup(ifname=port)[0]
            ipr.route(
                "replace", dst=address, dst_len=32, oif=index, scope=253
            )  # scope link: the far switch answers ARP
    return ifindex
