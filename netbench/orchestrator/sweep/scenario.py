"""A sweep scenario: the grid (bandwidth x replicator x nodes x delay x network) and what every point runs.

Read from a TOML file in ``scenarios/`` or built from ``netbench sweep`` options; both go through
the same pydantic model, and every point's RunConfig is built (so validated) before the first
run starts: a typo in point 17 fails in a second, not after an hour of measuring points 1-16.

The points are the union of ``[grid]``'s product, each ``[[more]]`` table's (unset axes: the defaults)
and each ``[[points]]`` table's (unset axes: ``[grid]``'s; single values make one point). An axis is a
list or a single value. The network axes: ``topology`` (star, sites, racks, or a topology file, its
path relative to the scenario file), then what the presets take: ``sites``, ``wan_bw``, ``wan_delay``
(sites), ``racks``, ``oversubscription`` (racks), and ``rank_order`` (any). An axis a point's topology
does not take is left out of that point, so a star and a sites preset share one grid.

Every error is one line naming the field (``grid.bw[1]``, ``points[2].wan_bw``) or the option (``--bw``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from netbench import untrusted
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import REGISTRY, default_sweep
from netbench.emulation.spec import NETWORK, ClusterSpec
from netbench.emulation.tcpsettings import TcpOptions, check_tcp_options
from netbench.orchestrator.config import RunConfig, shard_choices, shard_name
from netbench.safe_files import NAME_PATTERN
from netbench.schedule import Schedule, ScheduleError
from netbench.schedule import load as load_schedule
from netbench.schedule.fits import check_whole_membership
from netbench.settings import Setting
from netbench.topology.file import TopologyError
from netbench.topology.graph import Topology
from netbench.topology.options import MAX_OVERSUBSCRIPTION, PRESETS, topology_from_options
from netbench.topology.placement import PlacementError, parse_rank_order
from netbench.topology.presets import DEFAULT_PRESET, TOPOLOGY
from netbench.units import UnitError, parse_rate, parse_time
from netbench.untrusted import shown_name
from netbench.validation import one_line
from netbench.workloads.config import STORED, WorkloadConfig

__all__ = [
    "ScenarioError",
    "MAX_POINTS",
    "Grid",
    "SweepScenario",
    "Point",
    "load_scenario",
    "read_toml",
    "scenario_from_dict",
    "points",
]


MAX_POINTS = 2000  # a point is a measured run of seconds to minutes: 2000 of them are a day of the host


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is one line naming the field."""


def _each(values: list[str], parse) -> list[str]:
    for i, text in enumerate(values):
        try:
            parse(text)
        except UnitError as exc:
            raise UnitError(f"[{i}] {exc}", f"[{i}] {exc.unquoted}") from None
    return values


def _run_axis(field: str) -> Any:
    """A grid axis of a run option: RunConfig's ``field``, its default the one value, its description the axis's."""
    info = RunConfig.model_fields[field]
    return Field([info.default], min_length=1, description=info.description)


def _axis_of(setting: Setting, default: Any = None) -> Any:
    """A grid axis of ``setting``: one value, its default (or ``default``), unless the scenario lists others; its help
    is the axis's description."""
    value = setting.default if default is None else default
    return Field([value], min_length=1, description=setting.help_for())


class Grid(BaseModel):
    """The axes; the sweep runs their full product. A single value is an axis of one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bw: list[str] = _axis_of(NETWORK["bw"])
    replicator: list[str] = Field(default_factory=default_sweep, min_length=1, description="replicator names")
    nodes: list[int] = _axis_of(NETWORK["nodes"])
    delay: list[str] = _axis_of(NETWORK["delay"])
    gpus_per_node: list[int] = Field(
        [1], min_length=1, description="workers per node (FlexDeMo: shard inside, replicate between)"
    )
    intra_bw: list[str] = Field(
        ["unshaped"], min_length=1, description="intra-node link rates, tc units, or 'unshaped'"
    )
    topology: list[str] = _axis_of(TOPOLOGY["topology"], default=DEFAULT_PRESET)
    sites: list[int] = _axis_of(TOPOLOGY["sites"])
    wan_bw: list[str] = _axis_of(TOPOLOGY["wan_bw"])
    wan_delay: list[str] = _axis_of(TOPOLOGY["wan_delay"])
    racks: list[int] = _axis_of(TOPOLOGY["racks"])
    oversubscription: list[float] = _axis_of(TOPOLOGY["oversubscription"])
    rank_order: list[str] = _axis_of(TOPOLOGY["rank_order"])
    shard_within: list[Literal["node", "site"]] = Field(
        ["node"], min_length=1, description="what shards the model: node, or site (replicate between sites)"
    )
    shard: list[str] = _run_axis("shard")

    @field_validator("*", mode="before")
    @classmethod
    def _axis(cls, v: Any) -> Any:
        return v if isinstance(v, list) else [v]

    @field_validator("wan_bw")
    @classmethod
    def _wan_rates(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(_each(v, parse_rate)))

    @field_validator("wan_delay")
    @classmethod
    def _wan_delays(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(_each(v, parse_time)))

    @field_validator("sites", "racks", "gpus_per_node")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        for i, g in enumerate(v):
            if g < 1:
                raise ValueError(f"[{i}] must be at least 1, got {g}")
        return list(dict.fromkeys(v))

    @field_validator("oversubscription")
    @classmethod
    def _factors(cls, v: list[float]) -> list[float]:
        for i, f in enumerate(v):
            if not 1.0 <= f <= MAX_OVERSUBSCRIPTION:  # also refuses nan
                raise ValueError(f"[{i}] must be between 1 and {MAX_OVERSUBSCRIPTION:g}, got {f:g}")
        return list(dict.fromkeys(v))

    @field_validator("rank_order")
    @classmethod
    def _orders(cls, v: list[str]) -> list[str]:
        for i, text in enumerate(v):
            try:
                parse_rank_order(text)
            except PlacementError as exc:
                raise ValueError(f"[{i}] {str(exc).removeprefix('--rank-order: ')}") from None
        return list(dict.fromkeys(v))

    @field_validator("shard")
    @classmethod
    def _shardings(cls, v: list[str]) -> list[str]:
        choices = shard_choices()
        for i, name in enumerate(v):
            if name not in choices:
                raise ValueError(f"[{i}] choose {', '.join(choices)}, got {shown_name(name)}")
        return list(dict.fromkeys(shard_name(name) for name in v))

    @field_validator("topology")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        for i, text in enumerate(v):
            if not text.strip():
                raise ValueError(f"[{i}] choose {', '.join(PRESETS)} or a topology file's path, got ''")
        return list(dict.fromkeys(v))

    @field_validator("intra_bw")
    @classmethod
    def _intra_rates(cls, v: list[str]) -> list[str]:
        _each([x for x in v if x != "unshaped"], parse_rate)
        return list(dict.fromkeys(v))

    @field_validator("bw")
    @classmethod
    def _rates(cls, v: list[str]) -> list[str]:
        return _each(v, parse_rate)

    @field_validator("delay")
    @classmethod
    def _delays(cls, v: list[str]) -> list[str]:
        return _each(v, parse_time)

    @field_validator("replicator")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        unknown = [n for n in v if n not in REGISTRY]
        if unknown:
            raise ValueError(f"unknown replicator {shown_name(unknown[0])} (choose from {', '.join(REGISTRY)})")
        return list(dict.fromkeys(v))


class SweepScenario(BaseModel):
    """Everything a sweep runs: the grid, per-point run settings, the workload and replicator knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("sweep", pattern=NAME_PATTERN, description="names the output folder")
    description: str = ""
    grid: Grid = Field(default_factory=Grid)
    more: list[Grid] = Field(
        default_factory=list,
        description="further grids whose points join grid's: a sparse design as a union of small products",
    )
    points: list[dict[str, Any]] = Field(
        default_factory=list, description="explicit points: each table's unset axes are grid's"
    )
    steps: int = Field(10, ge=1, le=100_000, description="measured steps per point")
    warmup: int = Field(2, ge=0, le=1000, description="warm-up steps per point")
    timeout_s: float | None = Field(
        None, gt=0, le=3600, description="collective timeout per point; unset: from the model"
    )
    capture: bool = Field(True, description="capture packet headers (parsing them costs seconds per point)")
    threads: int = Field(1, ge=1, le=64)
    calibrate: bool = Field(
        False, description="measure this host's model constants on this workload before the first point"
    )
    workload: WorkloadConfig = Field(
        default_factory=WorkloadConfig, description="as `netbench run`: the transformer unless set"
    )
    replicator: dict[str, Any] = Field(
        default_factory=dict, description="ReplicatorConfig settings shared by every replicator"
    )
    tcp: TcpOptions = Field(
        default_factory=TcpOptions,
        description="TCP settings of every point's nodes (cc, wmem_max, slow_start_after_idle)",
    )
    schedule: str | None = Field(
        None,
        description="a link schedule or trace file every point runs with (netbench.schedule; "
        "relative to the scenario file's folder)",
    )

    @model_validator(mode="after")
    def _bounded(self) -> SweepScenario:
        """At most MAX_POINTS points, counted from the axes before any point is made: a ``[[points]]`` table counts
        as the points it expands to (its own axes, and grid's where it sets none)."""
        grids = [self.grid, *self.more]
        count = sum(math.prod(len(getattr(g, axis)) for axis in Grid.model_fields) for g in grids)
        for entry in self.points:
            count += math.prod(
                _values(entry[axis]) if axis in entry else len(getattr(self.grid, axis)) for axis in Grid.model_fields
            )
        if count > MAX_POINTS:
            raise ValueError(f"{count} points; a sweep runs at most {MAX_POINTS} (split it into several sweeps)")
        return self

    def sections(self) -> list[tuple[str, Grid]]:
        """Every grid by where it was written: ``grid``, ``more[i]``, ``points[i]`` (a point: grid's axes with its
        own).
        """
        own = [Grid.model_validate(p) for p in self.points]
        return [
            ("grid", self.grid),
            *((f"more[{i}]", g) for i, g in enumerate(self.more)),
            *(
                (f"points[{i}]", self.grid.model_copy(update={k: getattr(g, k) for k in g.model_fields_set}))
                for i, g in enumerate(own)
            ),
        ]

    @field_validator("replicator")
    @classmethod
    def _settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "name" in v:
            raise ValueError("set replicator names in grid.replicator, not replicator.name")
        ReplicatorConfig(**v)  # unknown or out-of-range settings fail here, naming the field
        return v


def _values(given: object) -> int:
    """How many values an axis of a ``[[points]]`` table lists (a single value is one)."""
    return len(given) if isinstance(given, list) else 1


@dataclass(frozen=True)
class Point:
    """One run of the grid: a readable label, a key that changes when anything it runs changes, its config."""

    label: str
    key: str
    config: RunConfig
    bw: str
    delay: str
    topology: str = "star"  # star, sites, racks, or the topology file's name
    variant: str = ""  # what sets the point apart beyond replicator, nodes, rate and delay ("" on the plain star)
    wan_bw: str = ""  # the sites preset's WAN links ("" elsewhere)
    wan_delay: str = ""
    rank_order: str = "topology"


@dataclass(frozen=True)
class _Network:
    """A point's network axes, with those its topology does not take left out (None)."""

    topology: str = "star"
    sites: int | None = None
    wan_bw: str | None = None
    wan_delay: str | None = None
    racks: int | None = None
    oversubscription: float | None = None
    rank_order: str = "topology"

    @classmethod
    def of(
        cls, topology: str, sites: int, wan_bw: str, wan_delay: str, racks: int, oversubscription: float, order: str
    ) -> _Network:
        preset = PRESETS.get(topology)
        given = {"sites": sites, "wan_bw": wan_bw, "wan_delay": wan_delay, "racks": racks}
        taken = {
            k: v for k, v in {**given, "oversubscription": oversubscription}.items() if preset and k in preset.takes
        }
        if preset is PRESETS["star"] and order == "interleaved":  # one switch: interleaving places ranks as they are
            order = "topology"
        return cls(topology, **taken, rank_order=order)

    def label(self) -> str:
        """`` sites2 wan 100mbit 20ms``, `` racks2 4:1``, `` file NAME``; and the rank order where not site by site."""
        preset = PRESETS.get(self.topology)
        text = preset.label({k: getattr(self, k) for k in preset.takes}) if preset else Path(self.topology).stem
        return (f" {text}" if text else "") + ("" if self.rank_order == "topology" else f" ranks {self.rank_order}")

    @property
    def name(self) -> str:
        return self.topology if self.topology in PRESETS else Path(self.topology).stem


def _where(prefix: str, field: str, names: dict[str, str] | None, index: str = "") -> str:
    """``FILE: grid.bw[1]`` for a value from a file, or the option (``--bw``) when it came from one."""
    if names and field in names:
        return names[field]
    return prefix + field + index


def scenario_from_dict(data: dict[str, Any], source: str = "", names: dict[str, str] | None = None) -> SweepScenario:
    """Validate a scenario; ScenarioError names ``source`` and the field (or its option, via ``names``)."""
    prefix = f"{source}: " if source else ""
    try:
        scenario = SweepScenario.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ScenarioError(one_line(exc, names, prefix=prefix, echo=None)) from None
    for i, entry in enumerate(scenario.points):
        try:
            Grid.model_validate(entry)
        except pydantic.ValidationError as exc:
            raise ScenarioError(one_line(exc, prefix=f"{prefix}points[{i}].", echo=False)) from None
    points(scenario, Path("."), prefix=prefix, names=names)  # every point's cluster and run settings, validated now
    return scenario


def read_toml(path: Path) -> dict[str, Any]:
    """A scenario file's raw table (validated later, after any command-line overrides)."""
    try:
        data = untrusted.read_toml(path, untrusted.SCENARIO)
    except untrusted.BadInput as exc:
        raise ScenarioError(str(exc)) from None
    data.setdefault("name", path.stem)
    _files_beside(data, path.parent)
    return data


def _files_beside(data: dict[str, Any], folder: Path) -> None:
    """Topology and schedule files named in the scenario are read relative to its folder (presets and absolute paths
    stay).
    """
    if isinstance(data.get("schedule"), str) and data["schedule"].strip() and not Path(data["schedule"]).is_absolute():
        data["schedule"] = str(folder / data["schedule"])
    listed = [t for key in ("more", "points") for t in (data.get(key) if isinstance(data.get(key), list) else [])]
    tables = [data.get("grid"), *listed]  # anything malformed is the model's to report, field by field
    for table in tables:
        if not isinstance(table, dict) or "topology" not in table:
            continue
        value = table["topology"]
        names = value if isinstance(value, list) else [value]
        if all(isinstance(n, str) for n in names):
            beside = [n if n in PRESETS or not n.strip() or Path(n).is_absolute() else str(folder / n) for n in names]
            table["topology"] = beside if isinstance(value, list) else beside[0]


def load_scenario(path: Path) -> SweepScenario:
    """Read and validate a TOML scenario file (its name defaults to the file's stem)."""
    return scenario_from_dict(read_toml(path), str(path))


def _key(config: RunConfig) -> str:
    """Short hash of everything a point runs except where results go and whether it is traced. Settings at their
    defaults (one worker per node, sharding by node, the one-switch cluster) are left out, so a point's key names
    only what it changes and a sweep folder's finished points are found again when it resumes."""
    flat = {"gpus_per_node", "intra_bw_bps"} if config.gpus_per_node == 1 and config.intra_bw_bps is None else set()
    by_node = {"shard_within"} if config.shard_within == "node" else set()  # sharding by node leaves the key as it is
    star = config.cluster.on_star and config.cluster.rank_order == "topology"  # the default network
    unscheduled = {"schedule"} if config.schedule is None else set()  # the network as built, as ever
    exclude: dict = {"out_dir": True, "trace": True, **{k: True for k in (*flat, *by_node, *unscheduled)}}
    if star:
        exclude["cluster"] = {"topology": True, "rank_order": True}
    text = config.model_dump_json(exclude=exclude)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


_NETWORK_FIELDS = {
    "--topology": "topology",
    "--sites": "sites",
    "--racks": "racks",
    "--wan-bw": "wan_bw",
    "--wan-delay": "wan_delay",
    "--oversubscription": "oversubscription",
    "--rank-order": "rank_order",
    "nodes": "nodes",
}


def variant(gpus: int, intra: str, shard: str, net: _Network, weights: str = "none") -> str:
    """What a point runs beyond its replicator, nodes, rate and delay, as its label writes it ("" on the plain star).

    Two points of one sweep may share those four coordinates (a star and two sites, sharded or not);
    the variant tells them apart in labels, in summary.csv and in ``compare``'s matching.
    """
    return " ".join(part for part in (_setup(gpus, intra, shard, weights), net.label().strip()) if part)


def _setup(gpus: int, intra: str, shard: str, weights: str = "none") -> str:
    """Workers per node, their link, where replicas shard and whether the weights are sharded too (``--shard``), as
    the label writes them before the rate."""
    sharded = f"x{gpus}" + (f" intra {intra}" if intra != "unshaped" else "") if gpus > 1 else ""
    parts = (sharded, "sharded in sites" if shard == "site" else "", "" if weights == "none" else weights)
    return " ".join(part for part in parts if part)


def expected_coordinates(scenario: SweepScenario) -> list[tuple[str, int, str, str, str]]:
    """(replicator, nodes, rate, delay, variant) of every point whose node count the scenario itself sets.

    Points on a topology file take the file's node count, which this does not read; they are left out.
    """
    return [
        (r, n, b, d, variant(gpus, intra, shard, net, weights))
        for n, d, b, r, gpus, intra, net, shard, weights, _section in _combos(scenario)
        if n is not None
    ]


def recorded_grid_points(recorded: dict[str, Any]) -> list[tuple[str, int, str, str, str]]:
    """:func:`expected_coordinates` of a scenario as sweep.json records it (its grid, more and points);
    pydantic.ValidationError for one that is not a scenario."""
    return expected_coordinates(SweepScenario.model_validate(recorded, context=STORED))


def _combos(scenario: SweepScenario) -> list[tuple]:
    """Every point's axes, in run order (nodes, then delay, bandwidth, replicator, ...), each once, with its section."""
    out: dict[tuple, str] = {}
    for section, g in scenario.sections():
        for n, d, b, r, gpus, intra, topo, sites, wan_bw, wan_delay, racks, over, order, shard, weights in product(
            g.nodes,
            g.delay,
            g.bw,
            g.replicator,
            g.gpus_per_node,
            g.intra_bw,
            g.topology,
            g.sites,
            g.wan_bw,
            g.wan_delay,
            g.racks,
            g.oversubscription,
            g.rank_order,
            g.shard_within,
            g.shard,
        ):
            net = _Network.of(topo, sites, wan_bw, wan_delay, racks, over, order)
            n = None if topo not in PRESETS else n  # a topology file sets its own node count
            out.setdefault(
                (n, d, b, r, gpus, intra if gpus > 1 else "unshaped", net, shard, weights), section
            )  # one worker per node: no intra link
    return [(*combo, section) for combo, section in out.items()]


def _on_network(
    cluster: ClusterSpec, nodes: int | None, net: _Network, where, files: dict[str, Topology]
) -> ClusterSpec:
    """``cluster`` on the point's network, its ranks placed; a bad value is one ScenarioError naming its field."""
    try:
        if net.topology in PRESETS:
            graph = topology_from_options(
                net.topology,
                nodes or cluster.nodes,
                cluster.up,
                cluster.down,
                net.sites,
                net.racks,
                net.wan_bw,
                net.wan_delay,
                net.oversubscription,
            )
        else:
            graph = files.get(net.topology) or files.setdefault(
                net.topology, topology_from_options(net.topology, cluster.nodes, cluster.up, cluster.down)
            )
        order = parse_rank_order(net.rank_order)
    except (TopologyError, PlacementError) as exc:
        option, _, message = str(exc).partition(": ")
        field = _NETWORK_FIELDS.get(option)
        raise ScenarioError(f"{where(field or 'topology')}: {message if field else exc}") from None
    try:
        return cluster.on_network(graph, order)
    except pydantic.ValidationError as exc:
        raise ScenarioError(f"{where('rank_order')}: {one_line(exc).split(': ', 1)[-1]}") from None
    except ValueError as exc:  # this host cannot emulate the graph
        raise ScenarioError(f"{where('topology')}: {exc}") from None


def _schedule(scenario: SweepScenario, prefix: str, names: dict[str, str] | None) -> Schedule | None:
    """The scenario's link schedule, read once for every point; a file that cannot be used is one ScenarioError."""
    if not scenario.schedule:
        return None
    try:
        schedule = load_schedule(Path(scenario.schedule))
        check_whole_membership(schedule)
    except (ScheduleError, ValueError) as exc:
        raise ScenarioError(f"{_where(prefix, 'schedule', names)}: {exc}") from None
    return schedule


def points(
    scenario: SweepScenario, runs_dir: Path, prefix: str = "", names: dict[str, str] | None = None
) -> list[Point]:
    """The grid's points in run order (nodes, then delay, bandwidth, replicator), each a validated RunConfig."""
    out = []
    files: dict[str, Topology] = {}  # a topology file is read once however many points run on it
    schedule = _schedule(scenario, prefix, names)
    for nodes, delay, bw, name, gpus, intra, net, shard, weights, section in _combos(scenario):

        def where(field: str, section: str = section) -> str:
            return _where(prefix, f"{section}.{field}", names)

        rate, delay_s = parse_rate(bw), parse_time(delay)
        try:
            cluster = ClusterSpec(
                nodes=nodes or 2, up={"rate_bps": rate, "delay_s": delay_s}, down={"rate_bps": rate}, tcp=scenario.tcp
            )
        except pydantic.ValidationError as exc:
            field = {"nodes": "nodes", "up.rate_bps": "bw", "down.rate_bps": "bw", "up.delay_s": "delay"}
            raise ScenarioError(
                one_line(exc, {k: where(v) for k, v in field.items()}, prefix=prefix, echo=False)
            ) from None
        cluster = _on_network(cluster, nodes, net, where, files)
        try:
            config = RunConfig(
                cluster=cluster,
                replicator=ReplicatorConfig(name=name, **scenario.replicator),
                workload=scenario.workload,
                steps=scenario.steps,
                warmup_steps=scenario.warmup,
                timeout_s=scenario.timeout_s,
                capture=scenario.capture,
                out_dir=runs_dir,
                threads=scenario.threads,
                shard_within=shard,
                shard=weights,
                schedule=schedule,
                **(
                    {"gpus_per_node": gpus, "intra_bw_bps": None if intra == "unshaped" else parse_rate(intra)}
                    if gpus > 1
                    else {}
                ),
            )
        except pydantic.ValidationError as exc:
            raise ScenarioError(
                one_line(
                    exc,
                    {
                        "shard_within": where("shard_within"),
                        "shard": where("shard"),
                        "schedule": _where(prefix, "schedule", names),
                        **(names or {}),
                    },
                    prefix=prefix,
                )
            ) from None
        problem = check_tcp_options(cluster.tcp)
        if problem:
            raise ScenarioError(f"{_where(prefix, 'tcp.cc', names)}: {problem.split(': ', 1)[1]}")
        setup = _setup(gpus, intra, shard, weights)
        out.append(
            Point(
                label=f"{name} {cluster.nodes}n{' ' * bool(setup)}{setup} {bw} {delay}{net.label()}",
                key=_key(config),
                config=config,
                bw=bw,
                delay=delay,
                topology=net.name,
                variant=variant(gpus, intra, shard, net, weights),
                wan_bw=net.wan_bw or "",
                wan_delay=net.wan_delay or "",
                rank_order=net.rank_order,
            )
        )
    return out
