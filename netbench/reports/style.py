"""One look for every figure: a fixed colour and collective per replicator, so a reader learns them once."""

from __future__ import annotations

__all__ = ["PALETTE", "colors", "COLLECTIVE", "NODE_MARKERS", "color", "collective", "node_marker", "delay_style"]

# Tableau colours handed to the registered replicators in registration order (full blue, dct red, random green,
# striding purple, diloco orange, lowrank brown, mtdao cyan, ...); grey is kept for names nobody registered.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#e377c2", "#bcbd22",
           "#aec7e8", "#ff9896", "#98df8a", "#c5b0d5", "#ffbb78", "#c49c94", "#9edae5", "#f7b6d2", "#dbdb8d")
UNKNOWN = "#7f7f7f"

COLLECTIVE = {"full": "all-reduce", "dct": "all-gather", "random": "all-reduce", "striding": "all-reduce",
              "diloco": "periodic all-reduce", "lowrank": "all-reduce of factors", "mtdao": "periodic all-reduce"}
NODE_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
DELAY_STYLES = ("-", "--", ":", "-.")


def colors() -> dict[str, str]:
    """A colour for every registered replicator, the same in every figure (derived, so a new or plugged-in replicator gets one too)."""
    from netbench.replicators.registry import REGISTRY

    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(REGISTRY)}


def color(replicator: str) -> str:
    """The replicator's colour; a name nobody registered gets grey rather than a colour another one owns."""
    return colors().get(replicator, UNKNOWN)


def collective(replicator: str) -> str:
    return COLLECTIVE.get(replicator, "custom")


def node_marker(nodes: int, node_counts: list[int]) -> str:
    """A marker per node count (in the order of the sweep's node counts)."""
    return NODE_MARKERS[sorted(node_counts).index(nodes) % len(NODE_MARKERS)]


def delay_style(delay_ms: float, delays: list[float]) -> str:
    """A line style per one-way delay (solid for the smallest)."""
    return DELAY_STYLES[sorted(delays).index(delay_ms) % len(DELAY_STYLES)]
