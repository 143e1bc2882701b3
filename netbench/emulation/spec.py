"""What a cluster should look like: validated before anything is created.

A link has two directions, each shaped separately: *up* is the node's egress (node -> switch),
*down* the switch port's egress (switch -> node). Delay, jitter and loss sit on a direction too;
the one-way delay from node i to node j is ``up[i].delay + down[j].delay``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netbench.emulation.tcpsettings import TcpOptions
from netbench.model.collectives import MIN_NODES
from netbench.units import format_rate, format_time

MIN_RATE_BPS = 10e6
MAX_RATE_BPS = 10e9
MAX_EMULATED_DELAY_S = 1.0  # one-way delay (and jitter) one direction of an emulated link may add
MAX_EMULATED_NODES = 64  # emulated nodes on this one host (plan's bound is model.steptime.MAX_PLANNED_NODES)


class DirectionSpec(BaseModel):
    """Shaping of one direction of one link."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # inf or nan would pass every range check

    rate_bps: float = Field(description="line rate in bits per second")
    delay_s: float = Field(0.0, description="one-way delay added on this direction")
    jitter_s: float = Field(0.0, description="standard deviation of the added delay")
    loss: float = Field(0.0, description="probability that a packet is dropped")

    @field_validator("rate_bps")
    @classmethod
    def _rate_in_range(cls, v: float) -> float:
        if not MIN_RATE_BPS <= v <= MAX_RATE_BPS:
            raise ValueError(f"must be between {format_rate(MIN_RATE_BPS)} and {format_rate(MAX_RATE_BPS)}, got {format_rate(v) if v > 0 else v}")
        return v

    @field_validator("delay_s", "jitter_s")
    @classmethod
    def _time_in_range(cls, v: float) -> float:
        if not 0 <= v <= MAX_EMULATED_DELAY_S:
            raise ValueError(f"must be between 0 and {format_time(MAX_EMULATED_DELAY_S)}, got {format_time(v) if v >= 0 else f'{v * 1e3:g}ms'}")
        return v

    @field_validator("loss")
    @classmethod
    def _loss_in_range(cls, v: float) -> float:
        if not 0 <= v <= 0.5:
            raise ValueError(f"must be between 0% and 50%, got {v * 100:g}%")
        return v

    @property
    def impaired(self) -> bool:
        """True when delay, jitter or loss needs an engine beyond the rate shaper."""
        return self.delay_s > 0 or self.jitter_s > 0 or self.loss > 0


class ClusterSpec(BaseModel):
    """N nodes behind one switch, every node with the same up and down shaping."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # inf or nan would pass every range check

    nodes: int = Field(2, description="number of emulated nodes")
    up: DirectionSpec
    down: DirectionSpec
    offload: Literal["auto", "on", "off"] = Field(
        "auto",
        description="TSO/GSO/GRO on the veths; auto keeps them off up to 2.5gbit so every skb is one real frame",
    )
    engine: Literal["auto", "netem", "delayline"] = Field("auto", description="what adds delay, jitter and loss")
    tcp: TcpOptions = Field(default_factory=TcpOptions, description="TCP settings of the nodes (unset: netbench's node defaults)")

    @field_validator("nodes")
    @classmethod
    def _nodes_in_range(cls, v: int) -> int:
        if not MIN_NODES <= v <= MAX_EMULATED_NODES:
            raise ValueError(f"must be between {MIN_NODES} and {MAX_EMULATED_NODES}, got {v}")
        return v

    @property
    def impaired(self) -> bool:
        return self.up.impaired or self.down.impaired

    @property
    def offload_enabled(self) -> bool:
        if self.offload != "auto":
            return self.offload == "on"
        return max(self.up.rate_bps, self.down.rate_bps) > 2.5e9

    def one_way_delay_s(self) -> float:
        """Configured one-way delay between two nodes (sender's up plus receiver's down)."""
        return self.up.delay_s + self.down.delay_s

    def expected_rtt_s(self) -> float:
        """Configured round-trip time between two nodes, excluding serialization and stack time."""
        return 2 * self.one_way_delay_s()
