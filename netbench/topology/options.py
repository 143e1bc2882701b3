"""A topology from command-line options: ``--topology star|sites|racks|PATH`` and the preset's own options.

One function for every command that takes them (run, sweep, exec, probe, plan), so the same options build the same
graph everywhere. Every bad combination is one :class:`~netbench.topology.file.TopologyError` line naming the option.
"""

from __future__ import annotations

from typing import Any

import pydantic

from netbench.topology.file import TopologyError, load_topology
from netbench.topology.graph import MAX_SWITCHES, MAX_TOPOLOGY_NODES, Topology
from netbench.topology.link import DirectionSpec
from netbench.topology.presets import NODES, PRESETS, TOPOLOGY, Preset
from netbench.units import UnitError, parse_rate, parse_time
from netbench.validation import one_line

__all__ = ["PRESETS", "MAX_OVERSUBSCRIPTION", "topology_from_options", "refuse_untaken"]

MAX_OVERSUBSCRIPTION = 1000.0


def _direction(option: str, rate: str, delay: str | None) -> DirectionSpec:
    """One direction from typed option values; a bad unit or range names ``option``."""
    try:
        return DirectionSpec(rate_bps=parse_rate(rate), delay_s=parse_time(delay or "0ms"))
    except UnitError as exc:
        raise TopologyError(f"{option}: {exc}") from None
    except pydantic.ValidationError as exc:
        raise TopologyError(one_line(exc, {"rate_bps": option, "delay_s": _option("wan_delay")})) from None


def _per_group(option: str, groups: int, nodes: int, kind: str) -> int:
    """``groups`` sites (racks): at least one, and dividing ``nodes``."""
    if not 1 <= groups <= MAX_SWITCHES:
        raise TopologyError(f"{option}: must be between 1 and {MAX_SWITCHES}, got {groups}")
    if nodes > MAX_TOPOLOGY_NODES:
        raise TopologyError(
            f"{NODES.name}: a {_KIND} {kind} graph holds at most {MAX_TOPOLOGY_NODES} nodes, got {nodes}"
        )
    if nodes % groups:
        raise TopologyError(
            f"{option}: {nodes} nodes do not divide into {groups} equal {kind} "
            f"({NODES.name} must be a multiple of {option})"
        )
    return groups


def _oversubscription(factor: float) -> float:
    if not 1.0 <= factor <= MAX_OVERSUBSCRIPTION:  # also refuses nan
        raise TopologyError(
            f"{_option('oversubscription')}: must be between 1 and {MAX_OVERSUBSCRIPTION:g}, got {factor:g}"
        )
    return factor


def _option(name: str) -> str:
    return TOPOLOGY[name].name


_KIND = TOPOLOGY["topology"].name


def _settings(preset: Preset, nodes: int, given: dict[str, Any]) -> dict[str, Any]:
    """The preset's settings: each as given, else its default; parsed and range-checked, each error naming its option.

    A setting without a default must be given. Beside the settings: ``wan``, the WAN links' direction of ``wan_bw`` and
    ``wan_delay``.
    """
    values = {name: default if given.get(name) is None else given[name] for name, default in preset.takes.items()}
    for name, value in values.items():  # in the declaration's order: the groups first
        if value is None:
            raise TopologyError(f"{_option(name)}: {_KIND} {preset.name} needs {_option(name)}")
        if name in ("sites", "racks"):
            _per_group(_option(name), value, nodes, preset.name)
    parsed = dict(values)
    if "oversubscription" in values:
        parsed["oversubscription"] = _oversubscription(float(values["oversubscription"]))
    if "wan_bw" in values:
        parsed["wan"] = _direction(_option("wan_bw"), values["wan_bw"], values["wan_delay"])
    return parsed


def refuse_untaken(kind: str, **given: Any) -> Preset | None:
    """The preset ``kind`` names (None for a file); TopologyError for a given option it does not take: a mistake, not
    something to ignore."""
    preset = PRESETS.get(kind)
    takes = preset.takes if preset is not None else {}
    for name, value in given.items():
        if value is not None and name not in takes:
            raise TopologyError(f"{_option(name)}: does not apply to {_KIND} {kind if preset else 'FILE'}")
    return preset


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
) -> Topology:
    """The graph ``--topology`` names: a preset of :data:`~netbench.topology.presets.PRESETS` (the star by default),
    or a topology file.

    ``up``/``down``: every node's access link (``--up``/``--down``/``--delay``). ``sites``: ``nodes / sites`` nodes per
    site, every pair of sites joined by one WAN link of ``wan_bw`` and ``wan_delay`` (one-way, each direction).
    ``racks``: ``nodes / racks`` nodes per rack under one spine, each rack's uplink ``oversubscription`` times narrower
    than its nodes' access links together. A PATH is a topology file (:mod:`netbench.topology.file`): it sets the nodes.
    """
    given = {
        "sites": sites,
        "racks": racks,
        "wan_bw": wan_bw,
        "wan_delay": wan_delay,
        "oversubscription": oversubscription,
    }
    preset = refuse_untaken(kind, **given)
    if preset is None:
        if not kind:
            raise TopologyError(f"{_KIND}: choose {', '.join(PRESETS)} or a topology file's path, got ''")
        return load_topology(kind)
    settings = _settings(preset, nodes, given)
    try:
        return preset.build(nodes, up, down, settings)
    except pydantic.ValidationError as exc:  # a rack uplink narrower than a link may be
        raise TopologyError(one_line(exc, {"rate_bps": _option("oversubscription")})) from None
