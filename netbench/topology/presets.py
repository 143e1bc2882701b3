"""The shapes people build: one switch (star), sites joined by WAN links, racks under a spine.

Each returns a :class:`~netbench.topology.graph.Topology`. Node ``i`` is named ``n{i}``, numbered site by site
(rack by rack); a node's access link carries its name, a trunk is named ``<a>--<b>`` after its two switches.

:data:`PRESETS` is the table ``--topology`` names (Mininet's ``TOPOS``): each :class:`Preset` says which settings it
takes beyond every node's access link, their defaults, and how it builds its graph. The star, netbench's default
network, is one entry like the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from netbench.settings import Override, Setting, table
from netbench.topology.graph import MAX_EMULATED_NODES, MIN_NODES, LinkSpec, NodeSpec, Topology
from netbench.topology.link import DirectionSpec

__all__ = [
    "Site",
    "Wan",
    "Preset",
    "PRESETS",
    "TOPOLOGY",
    "NODES",
    "DEFAULT_PRESET",
    "emulated",
    "star",
    "star_as_given",
    "sites",
    "uniform_sites",
    "racks",
    "trunk_name",
    "STAR_SWITCH",
    "SPINE",
]

STAR_SWITCH = "s0"
SPINE = "spine"


def trunk_name(a: str, b: str) -> str:
    return f"{a}--{b}"


@dataclass(frozen=True)
class Site:
    """A group of nodes behind one switch: each node's access link has ``up`` (node egress) and ``down``."""

    name: str
    nodes: int
    up: DirectionSpec
    down: DirectionSpec


@dataclass(frozen=True)
class Wan:
    """The trunk between two sites; ``reverse`` is the b -> a direction (the same as ``forward`` unless given)."""

    a: str
    b: str
    forward: DirectionSpec
    reverse: DirectionSpec | None = None


@dataclass
class NodeOverride:
    """What one node changes of its site's defaults: its access link's directions and its compute speed."""

    up: DirectionSpec | None = None
    down: DirectionSpec | None = None
    compute_scale: float = 1.0


def star(nodes: int, up: DirectionSpec, down: DirectionSpec) -> Topology:
    """N nodes behind one switch, every node with the same up and down shaping (netbench's default cluster)."""
    return sites([Site(STAR_SWITCH, nodes, up, down)], [], kind="star")


def star_as_given(nodes: int, up: DirectionSpec, down: DirectionSpec) -> Topology:
    """:func:`star` built without validation: a real cluster's, which may be one host or have a link of unknown rate."""
    members = tuple(NodeSpec.model_construct(name=f"n{i}", switch=STAR_SWITCH, compute_scale=1.0) for i in range(nodes))
    links = tuple(
        LinkSpec.model_construct(name=n.name, a=n.name, b=STAR_SWITCH, forward=up, reverse=down) for n in members
    )
    return Topology.model_construct(kind="star", nodes=members, switches=(STAR_SWITCH,), links=links)


def sites(
    groups: list[Site],
    wans: list[Wan],
    overrides: dict[int, NodeOverride] | None = None,
    kind: str = "sites",
    core: tuple[str, ...] = (),
) -> Topology:
    """Sites of nodes on their LAN, a trunk for every listed pair; ``overrides`` by node index; ``core``: switches
    without nodes.
    """
    overrides = overrides or {}
    nodes: list[NodeSpec] = []
    links: list[LinkSpec] = []
    for site in groups:
        for _ in range(site.nodes):
            i = len(nodes)
            o = overrides.get(i, NodeOverride())
            nodes.append(NodeSpec(name=f"n{i}", switch=site.name, compute_scale=o.compute_scale))
            links.append(
                LinkSpec(name=f"n{i}", a=f"n{i}", b=site.name, forward=o.up or site.up, reverse=o.down or site.down)
            )
    for wan in wans:
        links.append(
            LinkSpec(
                name=trunk_name(wan.a, wan.b), a=wan.a, b=wan.b, forward=wan.forward, reverse=wan.reverse or wan.forward
            )
        )
    return Topology(kind=kind, nodes=tuple(nodes), switches=(*(s.name for s in groups), *core), links=tuple(links))


def uniform_sites(
    count: int, nodes_per_site: int, up: DirectionSpec, down: DirectionSpec, wan: DirectionSpec
) -> Topology:
    """``count`` sites named site0, site1, ... of ``nodes_per_site`` nodes, every pair joined by the same WAN link."""
    names = [f"site{i}" for i in range(count)]
    return sites(
        [Site(n, nodes_per_site, up, down) for n in names], [Wan(a, b, wan) for a, b in combinations(names, 2)]
    )


def racks(count: int, nodes_per_rack: int, up: DirectionSpec, down: DirectionSpec, oversubscription: float) -> Topology:
    """``count`` racks of ``nodes_per_rack`` nodes, each rack's uplink to one spine oversubscribed by the factor.

    A rack's uplink carries ``nodes_per_rack * access rate / oversubscription`` each way (4:1 with 4 nodes of 1gbit:
    1gbit); the access links' delay stays on the access links, the trunks add none.
    """
    groups = [Site(f"rack{i}", nodes_per_rack, up, down) for i in range(count)]
    trunk_up = DirectionSpec(rate_bps=nodes_per_rack * up.rate_bps / oversubscription)
    trunk_down = DirectionSpec(rate_bps=nodes_per_rack * down.rate_bps / oversubscription)
    return sites(groups, [Wan(g.name, SPINE, trunk_up, trunk_down) for g in groups], kind="racks", core=(SPINE,))


@dataclass(frozen=True)
class Preset:
    """A network ``--topology`` names: the settings it takes (name -> default; None: the user must give it), how its
    graph is built from the node count, every node's access link and those settings (parsed by
    :mod:`netbench.topology.options`), and how a sweep point's label names it (from the settings as given).
    """

    name: str
    build: Callable[[int, DirectionSpec, DirectionSpec, dict[str, Any]], Topology]
    takes: dict[str, Any] = field(default_factory=dict)
    label: Callable[[dict[str, Any]], str] = lambda settings: ""


_EMULATING = ("run", "exec", "probe")  # the commands that build the cluster on this host


def emulated(note: str) -> dict[str, Override]:
    """The override of a setting whose range the emulating commands show (``note``: that range)."""
    why = "the emulating commands build the cluster on this host: they show its range"
    return {command: Override(why, note=note) for command in _EMULATING}


# How many hosts the network joins: every topology's node count (netbench.emulation.spec.NETWORK lists it first).
NODES = Setting(
    "--nodes",
    "nodes",
    "count",
    "Nodes (machines) in the cluster; with --gpus-per-node G each runs G workers: workers = nodes x G.",
    2,
    short="-n",
    axis=True,
    overrides=emulated(f" ({MIN_NODES}-{MAX_EMULATED_NODES})"),
)


# The network's shape: --topology and the settings its presets take (each preset's defaults are these).
TOPOLOGY = table(
    [
        Setting(
            "--topology",
            "topology",
            "text",
            "The network: star (default), sites, racks, or a topology TOML file.",
            axis=True,
            overrides={
                "worker": Override(
                    "the hosts are the nodes: only a file can say which host is which node",
                    help="A topology TOML file with one node per host: traffic to each peer is shaped to the path "
                    "between their nodes (needs root); the rest is left alone.",
                )
            },
        ),
        Setting("--sites", "sites", "count", "how many sites share the nodes.", 2, axis=True, scope="--topology sites"),
        Setting("--racks", "racks", "count", "how many racks share the nodes.", 2, axis=True, scope="--topology racks"),
        Setting(
            "--wan-bw",
            "wan_bw",
            "rate",
            "rate of each WAN link, both ways.",
            "100mbit",
            axis=True,
            scope="--topology sites",
        ),
        Setting(
            "--wan-delay",
            "wan_delay",
            "time",
            "one-way delay of each WAN link.",
            "0ms",
            axis=True,
            scope="--topology sites",
        ),
        Setting(
            "--oversubscription",
            "oversubscription",
            "factor",
            "access capacity over each rack's uplink.",
            1.0,
            axis=True,
            scope="--topology racks",
        ),
        Setting(
            "--rank-order",
            "rank_order",
            "text",
            "Which node each rank runs on: topology (site by site), interleaved, or 0,2,1,3.",
            "topology",
            axis=True,
            overrides={
                "worker": Override(
                    "each rank is a host of its own",
                    help="--topology: which node each rank's host is: topology (in node order), interleaved, or "
                    "0,2,1,3.",
                )
            },
        ),
    ]
)


def _takes(*names: str) -> dict[str, Any]:
    """A preset's settings, each with its one default (None: the user must give it)."""
    return {name: TOPOLOGY[name].default for name in names}


DEFAULT_PRESET = "star"  # what a command builds when --topology is left out

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(DEFAULT_PRESET, lambda nodes, up, down, s: star(nodes, up, down)),
        Preset(
            "sites",
            lambda nodes, up, down, s: uniform_sites(s["sites"], nodes // s["sites"], up, down, s["wan"]),
            _takes("sites", "wan_bw", "wan_delay"),
            lambda s: f"sites{s['sites']} wan {s['wan_bw']} {s['wan_delay']}",
        ),
        Preset(
            "racks",
            lambda nodes, up, down, s: racks(s["racks"], nodes // s["racks"], up, down, s["oversubscription"]),
            _takes("racks", "oversubscription"),
            lambda s: f"racks{s['racks']} {s['oversubscription']:g}:1",
        ),
    )
}
