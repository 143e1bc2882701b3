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

import tomllib
from itertools import combinations
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from netbench.safe_files import NAME_PATTERN
from netbench.small_files import UnreadableFile, read_small_text
from netbench.topology.graph import MAX_COMPUTE_SCALE, Topology
from netbench.topology.link import MIN_RATE_BPS, DirectionSpec
from netbench.topology.presets import NodeOverride, Site, Wan, racks, sites
from netbench.units import UnitError, parse_fraction, parse_rate, parse_time
from netbench.validation import one_line

__all__ = ["TopologyError", "load_topology", "topology_from_dict", "MAX_TOPOLOGY_FILE_BYTES"]

MAX_TOPOLOGY_FILE_BYTES = 256 * 1024


class TopologyError(ValueError):
    """A topology that cannot be built; the message is one line naming the file and field."""


def _check(parse, text: str) -> str:
    """``text`` if it parses and lies in the range a link direction takes (DirectionSpec's own checks)."""
    try:
        value = parse(text)
    except UnitError as exc:
        raise ValueError(str(exc)) from None
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
    nodes: int = Field(ge=1)
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
    racks: int = Field(ge=1)
    nodes_per_rack: int = Field(ge=1)
    bw: str
    delay: str = "0ms"
    oversubscription: float = Field(1.0, ge=1, le=1000)

    _rate = field_validator("bw")(lambda v: _check(parse_rate, v))
    _time = field_validator("delay")(lambda v: _check(parse_time, v))


class _TopologyFile(_Strict):
    sites: list[_SiteEntry] = Field(default_factory=list)
    wan: list[_WanEntry] = Field(default_factory=list)
    racks: _RacksEntry | None = None
    nodes: dict[str, _NodeEntry] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_shape(self) -> _TopologyFile:
        if bool(self.sites) == bool(self.racks):
            raise ValueError("give either [[sites]] (with [[wan]] links) or [racks], not both or neither")
        if self.racks and self.wan:
            raise ValueError("[[wan]] joins sites; a [racks] topology has none")
        return self


def _check_wan_pairs(file: _TopologyFile) -> None:
    names = [s.name for s in file.sites]
    listed: set[frozenset[str]] = set()
    for i, w in enumerate(file.wan):
        for end in w.between:
            if end not in names:
                raise TopologyError(f"wan[{i}].between: unknown site {end!r} (sites: {', '.join(names)})")
        pair = frozenset(w.between)
        if len(pair) == 1:
            raise TopologyError(f"wan[{i}].between: a WAN link joins two different sites, got {w.between[0]!r} twice")
        if pair in listed:
            raise TopologyError(f"wan[{i}].between: the pair {w.between[0]} / {w.between[1]} is listed twice")
        listed.add(pair)
    for a, b in combinations(names, 2):
        if frozenset((a, b)) not in listed:
            raise TopologyError(f"wan: the pair {a} / {b} is not listed (every pair of sites needs a [[wan]] link)")


def _overrides(file: _TopologyFile, node_count: int) -> dict[int, NodeOverride]:
    out: dict[int, NodeOverride] = {}
    for key, entry in file.nodes.items():
        if not key.isdigit() or int(key) >= node_count:
            raise TopologyError(
                f"nodes.{key}: there is no node {key} (nodes are numbered 0-{node_count - 1} in site order)"
            )
        up_bw, down_bw = entry.up or entry.bw, entry.down or entry.bw
        up = (
            entry.direction(up_bw)
            if up_bw or entry.delay != "0ms" or entry.jitter != "0ms" or entry.loss != "0%"
            else None
        )
        down = DirectionSpec(rate_bps=parse_rate(down_bw)) if down_bw else None
        out[int(key)] = NodeOverride(up=up, down=down, compute_scale=entry.compute_scale)
    return out


def _fill_override_defaults(file: _TopologyFile, overrides: dict[int, NodeOverride]) -> dict[int, NodeOverride]:
    """An override that names delay but no rate keeps its site's LAN rate."""
    lan = [s.lan_bw for s in file.sites for _ in range(s.nodes)] or [file.racks.bw] * (
        file.racks.racks * file.racks.nodes_per_rack
    )
    for i, o in overrides.items():
        entry = file.nodes[str(i)]
        if o.up is not None and not (entry.up or entry.bw):
            overrides[i] = NodeOverride(up=entry.direction(lan[i]), down=o.down, compute_scale=o.compute_scale)
    return overrides


def topology_from_dict(data: dict[str, Any], where: str = "topology") -> Topology:
    """A validated Topology from a TOML file's table (``where`` prefixes every message)."""
    try:
        file = _TopologyFile.model_validate(data)
        if file.racks:
            r = file.racks
            access = DirectionSpec(rate_bps=parse_rate(r.bw), delay_s=parse_time(r.delay))
            base = racks(
                r.racks, r.nodes_per_rack, access, DirectionSpec(rate_bps=parse_rate(r.bw)), r.oversubscription
            )
            count = base.node_count
        else:
            _check_wan_pairs(file)
            count = sum(s.nodes for s in file.sites)
        overrides = _fill_override_defaults(file, _overrides(file, count))
        if file.racks:
            return _with_overrides(base, overrides)
        return sites([s.site() for s in file.sites], [w.wan() for w in file.wan], overrides, kind="file")
    except pydantic.ValidationError as exc:
        raise TopologyError(one_line(exc, prefix=f"{where}: ")) from None
    except TopologyError as exc:
        raise TopologyError(f"{where}: {exc}") from None


def _with_overrides(topo: Topology, overrides: dict[int, NodeOverride]) -> Topology:
    """Apply node overrides to a built topology (racks): access links and compute scales."""
    if not overrides:
        return topo.model_copy(update={"kind": "file"})
    nodes = list(topo.nodes)
    links = list(topo.links)
    for i, o in overrides.items():
        nodes[i] = nodes[i].model_copy(update={"compute_scale": o.compute_scale})
        k = next(j for j, link in enumerate(links) if link.a == nodes[i].name)
        links[k] = links[k].model_copy(
            update={"forward": o.up or links[k].forward, "reverse": o.down or links[k].reverse}
        )
    return Topology(kind="file", nodes=tuple(nodes), switches=topo.switches, links=tuple(links))


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file; any problem is one TopologyError line."""
    try:
        text = read_small_text(path, "topology file", MAX_TOPOLOGY_FILE_BYTES)
    except UnreadableFile as exc:
        raise TopologyError(str(exc)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{path}: invalid TOML: {exc}") from None
    return topology_from_dict(data, str(path))
