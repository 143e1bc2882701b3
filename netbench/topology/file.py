"""A topology from a TOML file: sites on their LAN joined by WAN links, or racks under a spine, and per-node overrides.

::

    [[sites]]            # a group of nodes behind one switch
    name = "us-east"
    nodes = 2
    lan_bw = "1gbit"     # each node's access link, both directions
    lan_delay = "0ms"    # optional, one-way, on each node's uplink
    [[wan]]              # one link between two sites; every pair of sites must be listed
    between = ["us-east", "eu-west"]
    bw = "100mbit"
    delay = "40ms"       # one-way, each direction; optional jitter, loss
    reverse = { bw = "50mbit", delay = "45ms" }   # optional: eu-west -> us-east differs
    [nodes.3]            # optional overrides for one node, by its index (site order)
    bw = "10mbit"        # its access link (or up / down alone)
    compute_scale = 1.5  # its compute (and codec) takes 1.5x as long: a straggler

or, instead of sites and WAN links, ``[racks]`` with ``racks``, ``nodes_per_rack``, ``bw``, ``delay`` and
``oversubscription``. Every problem is one line naming the file and the field.
"""

from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from netbench import untrusted
from netbench.safe_files import NAME_PATTERN
from netbench.topology.graph import MAX_COMPUTE_SCALE, MAX_SWITCHES, MAX_TOPOLOGY_NODES, Topology
from netbench.topology.link import MIN_RATE_BPS, DirectionSpec
from netbench.topology.presets import NodeOverride, Site, Wan, racks, sites
from netbench.units import parse_fraction, parse_rate, parse_time
from netbench.validation import one_line

__all__ = ["TopologyError", "load_topology", "topology_from_dict", "MAX_TOPOLOGY_FILE_BYTES"]

MAX_TOPOLOGY_FILE_BYTES = untrusted.TOPOLOGY.max_bytes
_NODE_INDEX = re.compile(r"0|[1-9][0-9]{0,5}")  # ASCII digits only: int() also takes "٣", isdigit() also "²"


class TopologyError(ValueError):
    """A topology that cannot be built; the message is one line naming the file and field."""


def _check(parse, text: str) -> str:
    """``text`` if it parses and lies in the range a link direction takes (DirectionSpec's own checks)."""
    value = parse(text)  # a UnitError: pydantic keeps it, so a message can leave the file's value out
    field = {parse_rate: "rate_bps", parse_time: "delay_s", parse_fraction: "loss"}[parse]
    try:
        DirectionSpec(**{"rate_bps": MIN_RATE_BPS, field: value})
    except pydantic.ValidationError as exc:
        raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    return text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class _Shaping(_Strict):
    """Rate, delay, jitter and loss as typed (tc units)."""

    bw: str | None = None
    delay: str = "0ms"
    jitter: str = "0ms"
    loss: str = "0%"

    _rate = field_validator("bw")(lambda v: v if v is None else _check(parse_rate, v))
    _times = field_validator("delay", "jitter")(lambda v: _check(parse_time, v))
    _loss = field_validator("loss")(lambda v: _check(parse_fraction, v))

    def direction(self, default_bw: str | None = None) -> DirectionSpec:
        return DirectionSpec(
            rate_bps=parse_rate(self.bw or default_bw or ""),
            delay_s=parse_time(self.delay),
            jitter_s=parse_time(self.jitter),
            loss=parse_fraction(self.loss),
        )


class _SiteEntry(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    nodes: int = Field(ge=1, le=MAX_TOPOLOGY_NODES)
    lan_bw: str
    lan_delay: str = "0ms"

    _rate = field_validator("lan_bw")(lambda v: _check(parse_rate, v))
    _time = field_validator("lan_delay")(lambda v: _check(parse_time, v))

    def site(self) -> Site:
        return Site(
            self.name,
            self.nodes,
            DirectionSpec(rate_bps=parse_rate(self.lan_bw), delay_s=parse_time(self.lan_delay)),
            DirectionSpec(rate_bps=parse_rate(self.lan_bw)),
        )


class _WanEntry(_Shaping):
    between: tuple[str, str]
    bw: str  # type: ignore[assignment]  # a WAN link must name its rate
    reverse: _Shaping | None = None

    def wan(self) -> Wan:
        forward = self.direction()
        if self.reverse is None:
            return Wan(self.between[0], self.between[1], forward)
        typed = {k: getattr(self, k) for k in ("bw", "delay", "jitter", "loss")}  # what reverse leaves out it shares
        reverse = _Shaping(**{**typed, **self.reverse.model_dump(include=self.reverse.model_fields_set)}).direction()
        return Wan(self.between[0], self.between[1], forward, reverse)


class _NodeEntry(_Shaping):
    up: str | None = None
    down: str | None = None
    compute_scale: float = Field(1.0, gt=0, le=MAX_COMPUTE_SCALE)

    _rates = field_validator("up", "down")(lambda v: v if v is None else _check(parse_rate, v))


class _RacksEntry(_Strict):
    racks: int = Field(ge=1, le=MAX_SWITCHES)
    nodes_per_rack: int = Field(ge=1, le=MAX_TOPOLOGY_NODES)
    bw: str
    delay: str = "0ms"
    oversubscription: float = Field(1.0, ge=1, le=1000)

    _rate = field_validator("bw")(lambda v: _check(parse_rate, v))
    _time = field_validator("delay")(lambda v: _check(parse_time, v))


class _TopologyFile(_Strict):
    sites: list[_SiteEntry] = Field(default_factory=list, max_length=MAX_SWITCHES)
    wan: list[_WanEntry] = Field(default_factory=list, max_length=MAX_SWITCHES * (MAX_SWITCHES - 1) // 2)
    racks: _RacksEntry | None = None
    nodes: dict[str, _NodeEntry] = Field(default_factory=dict, max_length=MAX_TOPOLOGY_NODES)

    @model_validator(mode="after")
    def _one_shape(self) -> _TopologyFile:
        if bool(self.sites) == bool(self.racks):
            raise ValueError("give either [[sites]] (with [[wan]] links) or [racks], not both or neither")
        if self.racks and self.wan:
            raise ValueError("[[wan]] joins sites; a [racks] topology has none")
        if len(self.lan_rates()) > MAX_TOPOLOGY_NODES:  # counted before any node is built
            raise ValueError(f"{len(self.lan_rates())} nodes; a topology holds at most {MAX_TOPOLOGY_NODES}")
        return self

    def lan_rates(self) -> list[str]:
        """Each node's access rate as typed, in node order (site by site, rack by rack)."""
        if self.racks:
            return [self.racks.bw] * (self.racks.racks * self.racks.nodes_per_rack)
        return [s.lan_bw for s in self.sites for _ in range(s.nodes)]


def _check_wan_pairs(file: _TopologyFile) -> None:
    names = [s.name for s in file.sites]
    listed: set[frozenset[str]] = set()
    for i, w in enumerate(file.wan):
        for end in w.between:
            if end not in names:
                raise TopologyError(
                    f"wan[{i}].between: unknown site {untrusted.shown_name(end)} (sites: {', '.join(names)})"
                )
        pair = frozenset(w.between)
        if len(pair) == 1:
            raise TopologyError(f"wan[{i}].between: a WAN link joins two different sites, got {w.between[0]!r} twice")
        if pair in listed:
            raise TopologyError(f"wan[{i}].between: the pair {w.between[0]} / {w.between[1]} is listed twice")
        listed.add(pair)
    for a, b in combinations(names, 2):
        if frozenset((a, b)) not in listed:
            raise TopologyError(f"wan: the pair {a} / {b} is not listed (every pair of sites needs a [[wan]] link)")


def _overrides(file: _TopologyFile) -> dict[int, NodeOverride]:
    """Each ``[nodes.N]`` table as an override of node N; a delay without a rate keeps the node's LAN rate."""
    lan = file.lan_rates()
    out: dict[int, NodeOverride] = {}
    for key, entry in file.nodes.items():
        if not _NODE_INDEX.fullmatch(key) or int(key) >= len(lan):
            name = untrusted.shown_name(key, quoted=False)
            raise TopologyError(
                f"nodes.{name}: there is no node {name} (nodes are numbered 0-{len(lan) - 1} in site order)"
            )
        i = int(key)
        up_bw, down_bw = entry.up or entry.bw, entry.down or entry.bw
        shaped = up_bw or entry.delay != "0ms" or entry.jitter != "0ms" or entry.loss != "0%"
        up = entry.direction(up_bw or lan[i]) if shaped else None
        down = DirectionSpec(rate_bps=parse_rate(down_bw)) if down_bw else None
        out[i] = NodeOverride(up=up, down=down, compute_scale=entry.compute_scale)
    return out


def topology_from_dict(data: dict[str, Any], where: str = "topology") -> Topology:
    """A validated Topology from a TOML file's table (``where`` prefixes every message, which never shows a value)."""
    try:
        file = _TopologyFile.model_validate(data)
        if not file.racks:
            _check_wan_pairs(file)
        overrides = _overrides(file)
        if file.racks:
            r = file.racks
            access = DirectionSpec(rate_bps=parse_rate(r.bw), delay_s=parse_time(r.delay))
            base = racks(
                r.racks, r.nodes_per_rack, access, DirectionSpec(rate_bps=parse_rate(r.bw)), r.oversubscription
            )
            return _with_overrides(base, overrides)
        return sites([s.site() for s in file.sites], [w.wan() for w in file.wan], overrides, kind="file")
    except pydantic.ValidationError as exc:
        raise TopologyError(one_line(exc, prefix=f"{where}: ", echo=False)) from None
    except TopologyError as exc:
        raise TopologyError(f"{where}: {exc}") from None


def _with_overrides(topo: Topology, overrides: dict[int, NodeOverride]) -> Topology:
    """Apply node overrides to a built topology (racks): access links and compute scales."""
    if not overrides:
        return topo.model_copy(update={"kind": "file"})
    nodes = list(topo.nodes)
    links = list(topo.links)
    access = {link.a: j for j, link in enumerate(links)}
    for i, o in overrides.items():
        nodes[i] = nodes[i].model_copy(update={"compute_scale": o.compute_scale})
        k = access[nodes[i].name]
        links[k] = links[k].model_copy(
            update={"forward": o.up or links[k].forward, "reverse": o.down or links[k].reverse}
        )
    return Topology(kind="file", nodes=tuple(nodes), switches=topo.switches, links=tuple(links))


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file; any problem is one TopologyError line."""
    try:
        data = untrusted.read_toml(path, untrusted.TOPOLOGY)
    except untrusted.BadInput as exc:
        raise TopologyError(str(exc)) from None
    return topology_from_dict(data, untrusted.shown_path(path))
