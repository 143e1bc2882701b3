"""Which node each rank runs on: site by site (the default), interleaved across sites, or a list the user gives.

A ring follows rank order, so placement decides which ring hops cross a WAN link or a rack's uplink: site by site,
a ring of S sites crosses S trunks; interleaved, nearly every hop does, and those hops share the trunks.
"""

from __future__ import annotations

from netbench.topology.graph import Topology

__all__ = ["RANK_ORDERS", "PlacementError", "parse_rank_order", "place"]

RANK_ORDERS = ("topology", "interleaved")


class PlacementError(ValueError):
    """A rank order that does not name every node once; the message is one line."""


def parse_rank_order(text: str) -> str | tuple[int, ...]:
    """``topology``, ``interleaved`` or a comma-separated list of node indices (``0,2,1,3``)."""
    if text in RANK_ORDERS:
        return text
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise PlacementError(
            f"--rank-order: expected {' or '.join(RANK_ORDERS)} or a list of node indices, got {text!r}"
        ) from None


def place(topology: Topology, order: str | tuple[int, ...] = "topology") -> tuple[int, ...]:
    """Node index of every rank (rank r runs on node ``place(...)[r]``)."""
    n = topology.node_count
    if order == "topology":
        return tuple(range(n))
    if order == "interleaved":
        groups = list(topology.groups().values())
        return tuple(g[k] for k in range(max(map(len, groups))) for g in groups if k < len(g))
    if sorted(order) != list(range(n)):
        raise PlacementError(f"--rank-order: must list every node 0-{n - 1} once, got {','.join(map(str, order))}")
    return tuple(order)
