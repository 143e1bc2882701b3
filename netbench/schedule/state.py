"""One step of a schedule: the network in force after a set of simultaneous changes."""

from __future__ import annotations

from collections.abc import Iterable

from netbench.schedule.model import ALL, Change, Schedule, Segment, away_after
from netbench.topology.graph import LinkSpec, NodeSpec, Topology

__all__ = ["members_graph", "advance", "selected_links", "selected_nodes", "segments", "node_phases"]


def segments(schedule: Schedule, graph: Topology) -> list[Segment]:
    """The network in force between consecutive change times, starting from ``graph`` (before time 0: ``graph``)."""
    out: list[Segment] = []
    current, down, away = graph, frozenset(), frozenset()
    times = schedule.times
    for i, t in enumerate(times):
        now = [c for c in schedule.changes if c.time_s == t]
        current, down = advance(current, down, now)
        for change in now:
            away = away_after(away, change)
        out.append(Segment(i, t, times[i + 1] if i + 1 < len(times) else None, current, down, away))
    return out


def members_graph(segment: Segment) -> Topology | None:
    """The segment's network as its members see it: the nodes away dropped with their access links (switches and
    trunks stay), the rest named ``n0, n1, ...`` in their order, as a network of that many nodes names them; None
    where fewer than two nodes take part (nothing to exchange)."""
    graph = segment.graph
    if segment.members < 2:
        return None
    kept = [n for n in graph.nodes if n.name not in segment.away]
    renamed = {n.name: f"n{i}" for i, n in enumerate(kept)}
    links = []
    for link in graph.links:
        if link.a in segment.away:
            continue
        if link.a in renamed:
            name = renamed[link.a] if link.name == link.a else link.name
            link = link.model_copy(update={"a": renamed[link.a], "name": name})
        links.append(link)
    nodes = tuple(n.model_copy(update={"name": renamed[n.name]}) for n in kept)
    return Topology(kind=graph.kind, nodes=nodes, switches=graph.switches, links=tuple(links))


def node_phases(schedule: Schedule, graph: Topology, node: int) -> tuple[tuple[float, float], ...]:
    """(time_s, compute_scale) from each change time on, for node ``node``: what its worker paces to."""
    return tuple((s.start_s, s.graph.nodes[node].compute_scale) for s in segments(schedule, graph))


def selected_links(graph: Topology, target: str) -> list[LinkSpec]:
    """The links a target names: every link for ``*``, a node's access link for its name, else the link so named."""
    if target == ALL:
        return list(graph.links)
    if target in {n.name for n in graph.nodes}:
        return [next(link for link in graph.links if link.a == target)]
    return [graph.link(target)]


def selected_nodes(graph: Topology, target: str) -> list[int]:
    """Indices of the nodes a target names: every node for ``*``, else the node so named (none for a trunk)."""
    return [i for i, n in enumerate(graph.nodes) if target in (ALL, n.name)]


def advance(graph: Topology, down: frozenset[str], changes: Iterable[Change]) -> tuple[Topology, frozenset[str]]:
    """``graph`` and the set of down links after ``changes`` (applied in order; each keeps what it leaves None).

    A rate goes on both directions of a link; delay, jitter and loss on both directions of a trunk and on a node's
    uplink (its access link's forward direction), where ``--delay`` puts them.
    """
    links = {link.name: link for link in graph.links}
    nodes = list(graph.nodes)
    names = {n.name for n in graph.nodes}
    down_now = set(down)
    for change in changes:
        fields = change.link_fields
        for link in selected_links(graph, change.target):
            if fields:
                old = links[link.name]
                rate = {
                    k: v for k, v in fields.items() if k == "rate_bps"
                }  # an access link's delay is its uplink's, as --delay
                links[link.name] = old.model_copy(
                    update={
                        "forward": old.forward.model_copy(update=fields),
                        "reverse": old.reverse.model_copy(update=rate if link.a in names else fields),
                    }
                )
            if change.state is not None and link.a in names:
                (down_now.add if change.state == "down" else down_now.discard)(link.name)
        if change.compute_scale is not None:
            for i in selected_nodes(graph, change.target):
                nodes[i] = NodeSpec(name=nodes[i].name, switch=nodes[i].switch, compute_scale=change.compute_scale)
    new = Topology(
        kind=graph.kind,
        nodes=tuple(nodes),
        switches=graph.switches,
        links=tuple(links[link.name] for link in graph.links),
    )
    return new, frozenset(down_now)
