"""The network, TCP and topology settings of `probe`, `run`, `exec` and `sweep`, turned into a validated ClusterSpec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from netbench.cli.errors import UserError
from netbench.cli.options import SettingsGroup, settings_group
from netbench.emulation.capabilities import detect
from netbench.emulation.spec import NETWORK, ClusterSpec
from netbench.emulation.tcpsettings import TCP, check_tcp_options
from netbench.settings import Setting, SettingError
from netbench.topology.file import TopologyError
from netbench.topology.options import topology_from_options
from netbench.topology.placement import PlacementError, parse_rank_order
from netbench.topology.presets import DEFAULT_PRESET, TOPOLOGY
from netbench.validation import one_line

# The settings of every cluster an emulating command builds, in help order: declared beside their components.
CLUSTER_SETTINGS = (NETWORK, TCP, TOPOLOGY)


def network_group(command: str, **how: Any) -> SettingsGroup:
    """The network, TCP and topology options of ``command`` (``how``: see :func:`settings_group`), received as one
    ``{field: value}`` dict."""
    return settings_group(command, *CLUSTER_SETTINGS, **how)


def _setting(field: str) -> Setting:
    return next(t[field] for t in CLUSTER_SETTINGS if field in t)


def _name(field: str) -> str:
    return _setting(field).name


# ClusterSpec field -> the option that sets it, so validation errors name what the user typed (the
# downlink takes only a rate: delay, jitter and loss sit on the uplink)
OPTION_NAMES: dict[str, str] = {
    "nodes": _name("nodes"),
    "up.rate_bps": f"{_name('up')}/{_name('bw')}",
    "down.rate_bps": f"{_name('down')}/{_name('bw')}",
    "up.delay_s": _name("delay"),
    "up.jitter_s": _name("jitter"),
    "up.loss": _name("loss"),
    "offload": _name("offload"),
    "engine": _name("engine"),
    "tcp.cc": _name("tcp_cc"),
    "tcp.wmem_max": _name("tcp_wmem_max"),
    "tcp.slow_start_after_idle": _name("no_slow_start_after_idle"),
}


def _parse(field: str, value: Any) -> Any:
    try:
        return _setting(field).parse(value)
    except SettingError as exc:
        raise UserError(str(exc)) from None


def cluster_spec(given: Mapping[str, Any]) -> ClusterSpec:
    """The validated cluster that the network, TCP and topology settings in ``given`` describe (a setting left out
    takes its default); any problem is one UserError line naming the option."""
    values = {s.field: given.get(s.field, s.default) for t in CLUSTER_SETTINGS for s in t.values() if not s.scope}
    values.update({s.field: given.get(s.field) for s in TOPOLOGY.values() if s.scope})
    up_field = "up" if values["up"] else "bw"
    down_field = "down" if values["down"] else "bw"
    up_rate = _parse(up_field, values[up_field])
    down_rate = _parse(down_field, values[down_field])
    uplink = {
        "rate_bps": up_rate,
        "delay_s": _parse("delay", values["delay"]),
        "jitter_s": _parse("jitter", values["jitter"]),
        "loss": _parse("loss", values["loss"]),
    }
    tcp = {
        "cc": values["tcp_cc"],
        "wmem_max": values["tcp_wmem_max"],
        "slow_start_after_idle": False if values["no_slow_start_after_idle"] else None,
    }
    try:
        spec = ClusterSpec(
            nodes=values["nodes"],
            up=uplink,
            down={"rate_bps": down_rate},
            offload=values["offload"],
            engine=values["engine"],
            tcp=tcp,
        )
    except pydantic.ValidationError as exc:
        names = {**OPTION_NAMES, "up.rate_bps": _name(up_field), "down.rate_bps": _name(down_field)}
        raise UserError(one_line(exc, names, options=True)) from None
    problem = check_tcp_options(spec.tcp)
    if problem:
        raise UserError(problem)
    return _with_topology(spec, values)


def check_engine(spec: ClusterSpec) -> None:
    """Refuse, before anything is built, impairments this host cannot emulate (call once privileged).

    The capability probe needs root (or the user namespace), so this runs after the privilege
    step rather than with the other checks; it builds and removes one throwaway namespace.
    """
    if not spec.impaired:
        return

    caps = detect()
    engine = _name("engine")
    if spec.engine == "netem" and not caps.netem:
        raise UserError(
            f"{engine}: netem is not available here (this kernel has no sch_netem); use {engine} auto or delayline"
        )
    if spec.engine == "delayline" and not caps.delay_line:
        raise UserError(f"{engine}: the delay line does not work here ({caps.delay_line_reason})")
    if not (caps.netem or caps.delay_line):
        raise UserError(
            f"{_name('delay')}/{_name('jitter')}/{_name('loss')}: need netem or the delay line, and neither works "
            f"here ({caps.delay_line_reason})"
        )


def _with_topology(spec: ClusterSpec, values: Mapping[str, Any]) -> ClusterSpec:
    """``spec`` on the network the topology settings describe (its node count from the topology), ranks placed as asked.

    Every problem (a bad file, a preset that does not divide the nodes, too many nodes for this host) is one UserError.
    """

    try:
        graph = topology_from_options(
            values["topology"] or DEFAULT_PRESET,
            spec.nodes,
            spec.up,
            spec.down,
            **{s.field: values[s.field] for s in TOPOLOGY.values() if s.scope},
        )
        order = parse_rank_order(values["rank_order"])
    except (TopologyError, PlacementError) as exc:
        raise UserError(str(exc)) from None
    try:
        return spec.on_network(graph, order)
    except pydantic.ValidationError as exc:
        raise UserError(
            one_line(exc, {"rank_order": _name("rank_order"), "nodes": _name("topology")}, options=True)
        ) from None
    except ValueError as exc:  # this host cannot emulate the graph
        raise UserError(f"{_name('topology')}: {exc}") from None
