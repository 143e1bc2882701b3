"""One look for every figure: a fixed colour and collective per replicator, so a reader learns them once."""

from __future__ import annotations

from netbench.declarations.registry import REGISTRY

__all__ = ["PALETTE", "colors", "NODE_MARKERS", "color", "collective", "node_marker", "delay_style"]

# Tableau colours: each replicator's declaration claims one (netbench/replicators/*_spec.py); one that claims
# none gets the first colour nobody claimed, in listing order; grey is kept for names nobody declared.
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#17becf",
    "#e377c2",
    "#bcbd22",
    "#aec7e8",
    "#ff9896",
    "#98df8a",
    "#c5b0d5",
    "#ffbb78",
    "#c49c94",
    "#9edae5",
    "#f7b6d2",
    "#dbdb8d",
)
UNKNOWN = "#7f7f7f"

NODE_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
DELAY_STYLES = ("-", "--", ":", "-.")


def colors() -> dict[str, str]:
    """A colour for every declared replicator, the same in every figure (a plugged-in one without a colour of its
    own gets a free one)."""

    claimed = {s.color for s in REGISTRY.values() if s.color}
    free = iter([c for c in PALETTE if c not in claimed] or [UNKNOWN])
    return {name: s.color or next(free, UNKNOWN) for name, s in REGISTRY.items()}


def color(replicator: str) -> str:
    """The replicator's colour; a name nobody declared gets grey rather than a colour another one owns."""
    return colors().get(replicator, UNKNOWN)


def collective(replicator: str) -> str:
    """How the declaration names its exchange (``all-gather``...); ``custom`` for a name nobody declared."""

    declared = REGISTRY.get(replicator)
    return declared.collective if declared is not None else "custom"


def node_marker(nodes: int, node_counts: list[int]) -> str:
    """A marker per node count (in the order of the sweep's node counts)."""
    return NODE_MARKERS[sorted(node_counts).index(nodes) % len(NODE_MARKERS)]


def delay_style(delay_ms: float, delays: list[float]) -> str:
    """A line style per one-way delay (solid for the smallest)."""
    return DELAY_STYLES[sorted(delays).index(delay_ms) % len(DELAY_STYLES)]
