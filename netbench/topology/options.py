"""A topology from command-line options: ``--topology star|sites|racks|PATH`` and the preset's own options.

One function for every command that takes them (run, sweep, exec, probe, plan), so the same options build the same
graph everywhere. Every bad combination is one :class:`~netbench.topology.file.TopologyError` line naming the option.
"""

from __future__ import annotations

import pydantic

from netbench.topology.file import TopologyError, load_topology
from netbench.topology.graph import MAX_SWITCHES, MAX_TOPOLOGY_NODES, Topology
from netbench.topology.link import DirectionSpec
from netbench.topology.presets import racks as racks_preset
from netbench.topology.presets import uniform_sites
from netbench.units import UnitError, parse_rate, parse_time
from netbench.validation import one_line

__all__ = ["PRESETS", "MAX_OVERSUBSCRIPTION", "topology_from_options"]

PRESETS = ("star", "sites", "racks")
MAX_OVERSUBSCRIPTION = 1000.0


def _direction(option: str, rate: str, delay: str | None) -> DirectionSpec:
    """One direction from typed option values; a bad unit or range names ``option``."""
    try:
        return DirectionSpec(rate_bps=parse_rate(rate), delay_s=parse_time(delay or "0ms"))
    except UnitError as exc:
        raise TopologyError(f"{option}: {exc}") from None
    except pydantic.ValidationError as exc:
        raise TopologyError(one_line(exc, {"rate_bps": option, "delay_s": "--wan-delay"})) from None


def _per_group(option: str, groups: int | None, nodes: int, kind: str) -> int:
    """Nodes per site (rack): ``groups`` must be given, at least one, and divide ``nodes``."""
    if groups is None:
        raise TopologyError(f"{option}: --topology {kind} needs {option} (how many)")
    if not 1 <= groups <= MAX_SWITCHES:
        raise TopologyError(f"{option}: must be between 1 and {MAX_SWITCHES}, got {groups}")
    if nodes > MAX_TOPOLOGY_NODES:
        raise TopologyError(f"--nodes: a --topology {kind} graph holds at most {MAX_TOPOLOGY_NODES} nodes, got {nodes}")
    if nodes % groups:
        raise TopologyError(
            f"{option}: {nodes} nodes do not divide into {groups} equal {kind} (--nodes must be a multiple of {option})"
        )
    return nodes // groups


def _refuse(kind: str, **given: object) -> None:
    """Options that the chosen kind does not take are a mistake, not something to ignore."""
    for name, value in given.items():
        if value is not None:
            raise TopologyError(f"--{name.replace('_', '-')}: does not apply to --topology {kind}")


def topology_from_options(
    kind: str,
    nodes: int,
    up: DirectionSpec,
    down: DirectionSpec,
    sites: int | None = None,
    racks: int | None = None,
    wan_bw: str | None = None,
    wan_delay: str | None = None,
    oversubscription: float | None = None,
) -> Topology | None:
    """The graph ``--topology`` names, or None for the default star (netbench's one-switch cluster).

    ``up``/``down``: every node's access link (``--up``/``--down``/``--delay``). ``sites``: ``nodes / sites`` nodes per
    site, every pair of sites joined by one WAN link of ``wan_bw`` and ``wan_delay`` (one-way, each direction).
    ``racks``: ``nodes / racks`` nodes per rack under one spine, each rack's uplink ``oversubscription`` times narrower
    than its nodes' access links together. A PATH is a topology file (:mod:`netbench.topology.file`): it sets the nodes.
    """
    if kind == "star":
        _refuse(kind, sites=sites, racks=racks, wan_bw=wan_bw, wan_delay=wan_delay, oversubscription=oversubscription)
        return None
    if kind == "sites":
        _refuse(kind, racks=racks, oversubscription=oversubscription)
        per_site = _per_group("--sites", sites, nodes, "sites")
        if wan_bw is None:
            raise TopologyError("--wan-bw: --topology sites needs the WAN links' rate (e.g. --wan-bw 100mbit)")
        return uniform_sites(sites or 1, per_site, up, down, _direction("--wan-bw", wan_bw, wan_delay))
    if kind == "racks":
        _refuse(kind, sites=sites, wan_bw=wan_bw, wan_delay=wan_delay)
        per_rack = _per_group("--racks", racks, nodes, "racks")
        factor = 1.0 if oversubscription is None else oversubscription
        if not 1.0 <= factor <= MAX_OVERSUBSCRIPTION:  # also refuses nan
            raise TopologyError(f"--oversubscription: must be between 1 and {MAX_OVERSUBSCRIPTION:g}, got {factor:g}")
        try:
            return racks_preset(racks or 1, per_rack, up, down, factor)
        except pydantic.ValidationError as exc:  # a rack uplink narrower than a link may be
            raise TopologyError(one_line(exc, {"rate_bps": "--oversubscription"})) from None
    _refuse("FILE", sites=sites, racks=racks, wan_bw=wan_bw, wan_delay=wan_delay, oversubscription=oversubscription)
    if not kind:
        raise TopologyError(f"--topology: choose {', '.join(PRESETS)} or a topology file's path, got ''")
    return load_topology(kind)
