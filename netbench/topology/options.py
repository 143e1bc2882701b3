"""A topology from command-line options: ``--topology star|sites|racks|PATH`` and the preset's sizes and WAN link."""

from __future__ import annotations

from pathlib import Path

from netbench.topology.file import TopologyError, load_topology
from netbench.topology.graph import Topology
from netbench.topology.link import DirectionSpec
from netbench.topology.presets import racks as racks_preset
from netbench.topology.presets import uniform_sites
from netbench.units import UnitError, parse_rate, parse_time

__all__ = ["topology_from_options"]


def _per_group(option: str, nodes: int, groups: int) -> int:
    if groups < 2 or nodes % groups:
        raise TopologyError(f"{option}: needs at least 2 groups that divide --nodes {nodes} evenly, got {groups}")
    return nodes // groups


def topology_from_options(kind: str | None, nodes: int, up: DirectionSpec, down: DirectionSpec, sites: int | None,
                          racks: int | None, wan_bw: str | None, wan_delay: str | None,
                          oversubscription: float | None) -> Topology | None:
    """None for the star (no ``--topology``, or ``star``); else the preset or file. Problems raise TopologyError."""
    if kind in (None, "star"):
        return None
    try:
        if kind == "sites":
            wan = DirectionSpec(rate_bps=parse_rate(wan_bw or "100mbit"), delay_s=parse_time(wan_delay or "0ms"))
            return uniform_sites(sites or 2, _per_group("--sites", nodes, sites or 2), up, down, wan)
        if kind == "racks":
            ratio = 1.0 if oversubscription is None else oversubscription
            if not 0 < ratio <= 1000:
                raise TopologyError(f"--oversubscription: must be above 0 and at most 1000, got {ratio:g}")
            return racks_preset(racks or 2, _per_group("--racks", nodes, racks or 2), up, down, ratio)
    except TopologyError:
        raise
    except (UnitError, ValueError) as exc:
        raise TopologyError(f"--topology {kind}: {str(exc).splitlines()[0]}") from None
    return load_topology(Path(kind))
