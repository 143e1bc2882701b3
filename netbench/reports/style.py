"""One look for every figure: a fixed colour and collective per replicator, so a reader learns them once."""

from __future__ import annotations

__all__ = ["COLORS", "COLLECTIVE", "NODE_MARKERS", "color", "collective", "node_marker", "delay_style"]

# Tableau colours, one per replicator the project ships (all seven), the same in every figure.
COLORS = {"full": "#1f77b4", "dct": "#d62728", "random": "#2ca02c", "striding": "#9467bd", "diloco": "#ff7f0e",
          "lowrank": "#8c564b", "mtdao": "#17becf"}
COLLECTIVE = {"full": "all-reduce", "dct": "all-gather", "random": "all-reduce", "striding": "all-reduce",
              "diloco": "periodic all-reduce", "lowrank": "all-reduce of factors", "mtdao": "periodic all-reduce"}
NODE_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
DELAY_STYLES = ("-", "--", ":", "-.")


def color(replicator: str) -> str:
    """The replicator's colour; a plugin replicator gets grey rather than a colour another one owns."""
    return COLORS.get(replicator, "#7f7f7f")


def collective(replicator: str) -> str:
    return COLLECTIVE.get(replicator, "custom")


def node_marker(nodes: int, node_counts: list[int]) -> str:
    """A marker per node count (in the order of the sweep's node counts)."""
    return NODE_MARKERS[sorted(node_counts).index(nodes) % len(NODE_MARKERS)]


def delay_style(delay_ms: float, delays: list[float]) -> str:
    """A line style per one-way delay (solid for the smallest)."""
    return DELAY_STYLES[sorted(delays).index(delay_ms) % len(DELAY_STYLES)]
