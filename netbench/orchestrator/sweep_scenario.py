"""A sweep scenario: the grid (bandwidth x replicator x nodes x delay) and what every point runs.

Read from a TOML file in ``scenarios/`` or built from ``netbench sweep`` options; both go through
the same pydantic model, and every point's RunConfig is built (so validated) before the first
run starts: a typo in point 17 fails in a second, not after an hour of measuring points 1-16.

Every error is one line naming the field (``grid.bw[1]``) or the option (``--bw``).
"""

from __future__ import annotations

import hashlib
import itertools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from netbench.emulation.spec import ClusterSpec
from netbench.emulation.tcpsettings import TcpOptions, check_tcp_options
from netbench.orchestrator.config import RunConfig
from netbench.replicators.config import REPLICATOR_NAMES, ReplicatorConfig
from netbench.safe_files import NAME_PATTERN
from netbench.units import UnitError, parse_rate, parse_time
from netbench.validation import one_line
from netbench.workloads.config import WorkloadConfig

__all__ = ["ScenarioError", "Grid", "SweepScenario", "Point", "load_scenario", "read_toml", "scenario_from_dict", "points"]


class ScenarioError(ValueError):
    """A scenario that cannot be run; the message is one line naming the field."""


def _each(values: list[str], parse) -> list[str]:
    for i, text in enumerate(values):
        try:
            parse(text)
        except UnitError as exc:
            raise ValueError(f"[{i}] {exc}") from None
    return values


class Grid(BaseModel):
    """The axes; the sweep runs their full product."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bw: list[str] = Field(["100mbit"], min_length=1, description="link rates, tc units (both directions)")
    replicator: list[str] = Field(["full", "dct", "random"], min_length=1, description="replicator names")
    nodes: list[int] = Field([2], min_length=1, description="emulated node counts")
    delay: list[str] = Field(["0ms"], min_length=1, description="one-way delay on each uplink, tc units")
    gpus_per_node: list[int] = Field([1], min_length=1, description="workers per node (FlexDeMo: shard inside, replicate between)")
    intra_bw: list[str] = Field(["unshaped"], min_length=1, description="intra-node link rates, tc units, or 'unshaped'")

    @field_validator("gpus_per_node")
    @classmethod
    def _gpus(cls, v: list[int]) -> list[int]:
        for i, g in enumerate(v):
            if g < 1:
                raise ValueError(f"[{i}] must be at least 1, got {g}")
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
        unknown = [n for n in v if n not in REPLICATOR_NAMES]
        if unknown:
            raise ValueError(f"unknown replicator {unknown[0]!r} (choose from {', '.join(REPLICATOR_NAMES)})")
        return list(dict.fromkeys(v))


class SweepScenario(BaseModel):
    """Everything a sweep runs: the grid, per-point run settings, the workload and replicator knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("sweep", pattern=NAME_PATTERN, description="names the output folder")
    description: str = ""
    grid: Grid = Field(default_factory=Grid)
    more: list[Grid] = Field(default_factory=list, description="further grids whose points join grid's: a sparse design as a union of small products")
    steps: int = Field(10, ge=1, le=100_000, description="measured steps per point")
    warmup: int = Field(2, ge=0, le=1000, description="warm-up steps per point")
    timeout_s: float | None = Field(None, gt=0, le=3600, description="collective timeout per point; unset: from the model")
    capture: bool = Field(True, description="capture packet headers (parsing them costs seconds per point)")
    threads: int = Field(1, ge=1, le=64)
    calibrate: bool = Field(False, description="measure this host's model constants on this workload before the first point")
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig, description="as `netbench run`: the transformer unless set")
    replicator: dict[str, Any] = Field(default_factory=dict, description="ReplicatorConfig settings shared by every replicator")
    tcp: TcpOptions = Field(default_factory=TcpOptions, description="TCP settings of every point's nodes (cc, wmem_max, slow_start_after_idle)")

    @field_validator("replicator")
    @classmethod
    def _settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "name" in v:
            raise ValueError("set replicator names in grid.replicator, not replicator.name")
        ReplicatorConfig(**v)  # unknown or out-of-range settings fail here, naming the field
        return v


@dataclass(frozen=True)
class Point:
    """One run of the grid: a readable label, a key that changes when anything it runs changes, its config."""

    label: str
    key: str
    config: RunConfig
    bw: str
    delay: str


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
        raise ScenarioError(one_line(exc, names, prefix=prefix)) from None
    points(scenario, Path("."), prefix=prefix, names=names)  # every point's cluster and run settings, validated now
    return scenario


def read_toml(path: Path) -> dict[str, Any]:
    """A scenario file's raw table (validated later, after any command-line overrides)."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: invalid TOML: {exc}") from None
    data.setdefault("name", path.stem)
    return data


def load_scenario(path: Path) -> SweepScenario:
    """Read and validate a TOML scenario file (its name defaults to the file's stem)."""
    return scenario_from_dict(read_toml(path), str(path))


def _key(config: RunConfig) -> str:
    """Short hash of everything a point runs except where results go and whether it is traced (one worker per
    node hashes as before those fields existed)."""
    hybrid = {"gpus_per_node", "intra_bw_bps"} if config.gpus_per_node == 1 and config.intra_bw_bps is None else set()
    text = config.model_dump_json(exclude={"out_dir", "trace", *hybrid})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def points(scenario: SweepScenario, runs_dir: Path, prefix: str = "", names: dict[str, str] | None = None) -> list[Point]:
    """The grid's points in run order (nodes, then delay, bandwidth, replicator), each a validated RunConfig."""
    out = []
    combos = itertools.chain.from_iterable(itertools.product(g.nodes, g.delay, g.bw, g.replicator, g.gpus_per_node, g.intra_bw)
                                           for g in (scenario.grid, *scenario.more))
    combos = ((n, d, b, r, g, i if g > 1 else "unshaped") for n, d, b, r, g, i in combos)  # one worker per node has no intra-node link
    for nodes, delay, bw, name, gpus, intra in dict.fromkeys(combos):
        rate, delay_s = parse_rate(bw), parse_time(delay)
        try:
            cluster = ClusterSpec(nodes=nodes, up={"rate_bps": rate, "delay_s": delay_s}, down={"rate_bps": rate}, tcp=scenario.tcp)
        except pydantic.ValidationError as exc:
            field = {"nodes": "grid.nodes", "up.rate_bps": "grid.bw", "down.rate_bps": "grid.bw", "up.delay_s": "grid.delay"}
            raise ScenarioError(one_line(exc, {k: _where(prefix, v, names) for k, v in field.items()}, prefix=prefix)) from None
        try:
            config = RunConfig(
                cluster=cluster, replicator=ReplicatorConfig(name=name, **scenario.replicator), workload=scenario.workload,
                steps=scenario.steps, warmup_steps=scenario.warmup, timeout_s=scenario.timeout_s, capture=scenario.capture,
                out_dir=runs_dir, threads=scenario.threads,
                **({"gpus_per_node": gpus, "intra_bw_bps": None if intra == "unshaped" else parse_rate(intra)} if gpus > 1 else {}),
            )
        except pydantic.ValidationError as exc:
            raise ScenarioError(one_line(exc, names, prefix=prefix)) from None
        problem = check_tcp_options(cluster.tcp)
        if problem:
            raise ScenarioError(f"{_where(prefix, 'tcp.cc', names)}: {problem.split(': ', 1)[1]}")
        hybrid = f" x{gpus}" + (f" intra {intra}" if intra != "unshaped" else "") if gpus > 1 else ""
        out.append(Point(label=f"{name} {nodes}n{hybrid} {bw} {delay}", key=_key(config), config=config, bw=bw, delay=delay))
    return out
