"""A network as a graph: nodes, switches and links, each direction of each link shaped on its own.

The one object every command reads (Mininet's ``Topo`` idea): the emulator builds it (a namespace per node and per
switch, a veth per link), the model walks its paths, ``plan`` names its bottleneck, and run.json records it whole.
It is pure data, validated when made: names are unique, every link joins two known ends, every node hangs off
exactly one switch by its access link, and every node reaches every other. Paths are the fewest-hop routes through
the switches (ties broken by the smaller one-way delay, then by name), the same for the model and the emulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from netbench.safe_files import NAME_PATTERN
from netbench.topology.link import DirectionSpec

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "NodeSpec",
    "LinkSpec",
    "Hop",
    "Topology",
    "TopologyKind",
    "MAX_COMPUTE_SCALE",
    "MIN_NODES",
    "MAX_EMULATED_NODES",
    "MAX_TOPOLOGY_NODES",
    "MAX_SWITCHES",
    "MAX_LINKS",
]

TopologyKind = Literal["star", "sites", "racks", "file"]
MAX_COMPUTE_SCALE = 100.0  # a node 100x slower than the others is a different experiment
MIN_NODES = 2  # a collective needs a peer: the smallest cluster, emulated or planned
MAX_EMULATED_NODES = 64  # emulated nodes on this one host (plan's bound is model.steptime.MAX_PLANNED_WORKERS)
# A graph's size: the model walks every pair of nodes' path (a 4096-node graph plans in seconds), and every pair of
# sites is a WAN link (128 sites are 8128 of them). Files, options and stored runs are held to these before anything
# is built.
MAX_TOPOLOGY_NODES = 4096
MAX_SWITCHES = 128
MAX_LINKS = MAX_TOPOLOGY_NODES + MAX_SWITCHES * (MAX_SWITCHES - 1) // 2


class NodeSpec(BaseModel):
    """One machine: its name, the switch its access link reaches, and how slow its local work is."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(pattern=NAME_PATTERN, description="the node's name (n0, n1, ... in site order)")
    switch: str = Field(pattern=NAME_PATTERN, description="the switch (site or rack) its access link reaches")
    compute_scale: float = Field(
        1.0,
        gt=0,
        le=MAX_COMPUTE_SCALE,
        description="its compute and codec take this many times as long (a straggler above 1)",
    )


class LinkSpec(BaseModel):
    """A link between two ends (node-switch: an access link; switch-switch: a trunk), each direction shaped alone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, description="how schedules and reports name it")
    a: str = Field(description="one end (the node, for an access link)")
    b: str = Field(description="the other end (the switch, for an access link)")
    forward: DirectionSpec = Field(description="a -> b (an access link's uplink)")
    reverse: DirectionSpec = Field(description="b -> a (an access link's downlink)")

    def direction(self, forward: bool) -> DirectionSpec:
        return self.forward if forward else self.reverse


@dataclass(frozen=True)
class Hop:
    """One link crossed in one direction."""

    link: str
    forward: bool

    @property
    def label(self) -> str:
        """``n0`` up / ``us-east--eu-west`` forward, as reports name a link direction."""
        return f"{self.link}:{'fwd' if self.forward else 'rev'}"


class Topology(BaseModel):
    """Nodes, switches and links (see the module's docstring for what is checked)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: TopologyKind = Field("star", description="how it was made: a preset or a file")
    nodes: tuple[NodeSpec, ...] = Field(min_length=2, max_length=MAX_TOPOLOGY_NODES)
    switches: tuple[str, ...] = Field(min_length=1, max_length=MAX_SWITCHES)
    links: tuple[LinkSpec, ...] = Field(max_length=MAX_LINKS)

    @model_validator(mode="after")
    def _well_formed(self) -> Topology:
        names = [n.name for n in self.nodes]
        _unique("node", names)
        _unique("switch", list(self.switches))
        _unique("link", [link.name for link in self.links])
        clash = set(names) & set(self.switches)
        if clash:
            raise ValueError(f"{sorted(clash)[0]!r} names both a node and a switch")
        node_names, switch_names = set(names), set(self.switches)
        for link in self.links:
            _check_ends(link, node_names, switch_names)
        access: dict[str, list[LinkSpec]] = {}
        for link in self.links:
            access.setdefault(link.a, []).append(link)
        for node in self.nodes:
            mine = access.get(node.name, [])
            if len(mine) != 1 or mine[0].b != node.switch:
                raise ValueError(f"node {node.name!r} needs exactly one access link, to its switch {node.switch!r}")
        import networkx as nx  # late: a plan on a star never checks a graph (networkx takes 0.2 s to import)

        if not nx.is_connected(self._undirected()):
            raise ValueError("the network is not connected: " + _islands(self._undirected()))
        return self

    # ----------------------------------------------------------------- lookups
    @property
    def node_count(self) -> int:
        return len(self.nodes)

    @cached_property
    def _links(self) -> dict[str, LinkSpec]:
        return {link.name: link for link in self.links}

    def link(self, name: str) -> LinkSpec:
        return self._links[name]

    def access_link(self, node: int) -> LinkSpec:
        """Node ``node``'s link to its switch (its uplink is ``forward``)."""
        name = self.nodes[node].name
        return next(link for link in self.links if link.a == name)

    @property
    def trunks(self) -> tuple[LinkSpec, ...]:
        """Links between two switches."""
        return tuple(link for link in self.links if link.a in self.switches)

    def groups(self) -> dict[str, list[int]]:
        """Node indices per switch, in switch order: a site's (or a rack's) nodes."""
        return {
            s: [i for i, n in enumerate(self.nodes) if n.switch == s]
            for s in self.switches
            if any(n.switch == s for n in self.nodes)
        }

    def direction(self, hop: Hop) -> DirectionSpec:
        return self.link(hop.link).direction(hop.forward)

    # ------------------------------------------------------------------- paths
    def _undirected(self) -> nx.Graph:
        import networkx as nx  # late: see _well_formed

        g = nx.Graph()
        g.add_nodes_from([n.name for n in self.nodes] + list(self.switches))
        g.add_edges_from((link.a, link.b) for link in self.links)
        return g

    @cached_property
    def _digraph(self) -> nx.DiGraph:
        """One edge per link direction, weighted so that hops count first and delay only breaks ties."""
        import networkx as nx  # late: see _well_formed

        g = nx.DiGraph()
        for link in sorted(self.links, key=lambda link: link.name):
            for forward, (src, dst) in ((True, (link.a, link.b)), (False, (link.b, link.a))):
                weight = 1.0 + link.direction(forward).delay_s * 1e-3
                if not g.has_edge(src, dst) or g[src][dst]["weight"] > weight:
                    g.add_edge(src, dst, weight=weight, hop=Hop(link.name, forward))
        return g

    @cached_property
    def _routes(self) -> dict[str, dict[str, list[str]]]:
        import networkx as nx  # late: see _well_formed

        return dict(nx.all_pairs_dijkstra_path(self._digraph, weight="weight"))

    def switch_path(self, src: str, dst: str) -> tuple[Hop, ...]:
        """The hops between two ends by name (switches included): how the emulator routes across trunks."""
        ends = self._routes[src][dst]
        return tuple(self._digraph[u][v]["hop"] for u, v in zip(ends, ends[1:]))

    def path(self, src: int, dst: int) -> tuple[Hop, ...]:
        """The link directions a packet from node ``src`` to node ``dst`` crosses, in order."""
        return self.switch_path(self.nodes[src].name, self.nodes[dst].name)

    def one_way_delay_s(self, src: int, dst: int) -> float:
        """Configured one-way delay from node ``src`` to node ``dst`` (the sum over its path)."""
        return sum(self.direction(h).delay_s for h in self.path(src, dst))

    def bottleneck_bps(self, src: int, dst: int) -> float:
        """The slowest rate on the path from ``src`` to ``dst``, before any sharing."""
        return min(self.direction(h).rate_bps for h in self.path(src, dst))

    @property
    def impaired(self) -> bool:
        """True when some direction needs delay, jitter or loss (an engine beyond the rate shaper)."""
        return any(link.forward.impaired or link.reverse.impaired for link in self.links)

    @property
    def max_rate_bps(self) -> float:
        return max(max(link.forward.rate_bps, link.reverse.rate_bps) for link in self.links)


def _unique(what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what} name {name!r} is used twice")
        seen.add(name)


def _check_ends(link: LinkSpec, nodes: set[str], switches: set[str]) -> None:
    for end in (link.a, link.b):
        if end not in nodes and end not in switches:
            raise ValueError(f"link {link.name!r} joins {end!r}, which is neither a node nor a switch")
    if link.a == link.b:
        raise ValueError(f"link {link.name!r} joins {link.a!r} to itself")
    if link.b in nodes:
        raise ValueError(
            f"link {link.name!r} ends at node {link.b!r}: nodes reach the network through a switch (the node "
            "goes first)"
        )


def _islands(g: nx.Graph) -> str:
    import networkx as nx  # late: see Topology._well_formed

    parts = sorted((sorted(c) for c in nx.connected_components(g)), key=lambda c: c[0])
    return " | ".join(", ".join(c[:4]) + (", ..." if len(c) > 4 else "") for c in parts[:3])
