"""What a cluster should look like: validated before anything is created.

A link has two directions, each shaped separately: *up* is the node's egress (node -> switch),
*down* the switch port's egress (switch -> node). Delay, jitter and loss sit on a direction too;
the one-way delay from node i to node j is ``up[i].delay + down[j].delay``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from netbench.emulation.naming import MAX_SWITCHES
from netbench.emulation.tcpsettings import TcpOptions
from netbench.settings import Override, Setting, table
from netbench.topology.graph import MAX_EMULATED_NODES, MIN_NODES, LinkSpec, Topology
from netbench.topology.link import MAX_EMULATED_DELAY_S, MAX_RATE_BPS, MIN_RATE_BPS, DirectionSpec
from netbench.topology.placement import place
from netbench.topology.presets import NODES, emulated, star, star_as_given

__all__ = [
    "MIN_RATE_BPS",
    "MAX_RATE_BPS",
    "MAX_EMULATED_DELAY_S",
    "DirectionSpec",
    "ClusterSpec",
    "emulation_problem",
    "NETWORK",
]


def _worker(help: str) -> dict[str, Override]:
    """worker shapes only its own host's egress, and only when asked: unset, the host is left alone."""
    return {"worker": Override("worker shapes this host's egress only when asked", default=None, help=help)}


# Every node's access link and how it is emulated: the options of run, exec, probe, sweep and plan.
NETWORK = table(
    [
        NODES,
        Setting(
            "--bw",
            "bw",
            "rate",
            "Link rate both ways, tc units.",
            "100mbit",
            axis=True,
            overrides={
                **emulated(" (10mbit-10gbit)"),
                **_worker(
                    "Shape this host's egress on --iface to this rate (needs root). Unset: the host is left alone."
                ),
            },
        ),
        Setting(
            "--up",
            "up",
            "rate",
            "Uplink (node egress) rate; overrides --bw.",
            axis=True,
            overrides=_worker(
                "Egress rate; overrides --bw (ingress is never shaped: every host shapes its own egress)."
            ),
        ),
        Setting("--down", "down", "rate", "Downlink (switch-port egress) rate; overrides --bw.", axis=True),
        Setting(
            "--delay",
            "delay",
            "time",
            "One-way delay added on each node's uplink (e.g. 20ms): on the star, the one-way delay between two nodes.",
            "0ms",
            axis=True,
            overrides=_worker("One-way delay on egress (needs --bw and the kernel's netem)."),
        ),
        Setting(
            "--jitter",
            "jitter",
            "time",
            "Std. deviation of the uplink delay (packets stay in order).",
            "0ms",
            axis=True,
            overrides=_worker("Std. deviation of the delay (netem)."),
        ),
        Setting(
            "--loss",
            "loss",
            "fraction",
            "Uplink packet loss (e.g. 0.1%).",
            "0%",
            axis=True,
            overrides=_worker("Egress packet loss (netem)."),
        ),
        Setting("--offload", "offload", "choice", "TSO/GSO/GRO on veths: auto (off up to 2.5gbit), on, off.", "auto"),
        Setting(
            "--engine", "engine", "choice", "Delay/loss engine: auto (netem if present), netem, delayline.", "auto"
        ),
    ]
)


def emulation_problem(graph: Topology) -> str | None:
    """Why this host cannot emulate ``graph`` (too many or too few nodes, too many switches), or None."""

    if not MIN_NODES <= graph.node_count <= MAX_EMULATED_NODES:
        return f"{graph.node_count} nodes; this host may emulate {MIN_NODES}-{MAX_EMULATED_NODES}"
    if len(graph.switches) > MAX_SWITCHES:
        return f"{len(graph.switches)} switches; this host may emulate at most {MAX_SWITCHES}"
    return None


class ClusterSpec(BaseModel):
    """The emulated network: a graph of nodes, switches and links (:attr:`topology`), by default the star of ``nodes``
    behind one switch, every node's link shaped ``up`` and ``down``.

    ``nodes``, ``up`` and ``down`` are the star's inputs: given no topology, validation builds the star from them (the
    one place the default network is made); given one, ``nodes`` equals its node count. Everything that walks the
    network reads :attr:`topology`. The star is stored as no topology (run.json, sweep.json, a sweep point's key), so a
    record names only what a run changes and reads back as the same network.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False
    )  # inf or nan would pass every range check

    nodes: int = Field(2, description="number of emulated nodes")
    up: DirectionSpec
    down: DirectionSpec
    offload: Literal["auto", "on", "off"] = Field(
        "auto",
        description="TSO/GSO/GRO on the veths; auto keeps them off up to 2.5gbit so every skb is one real frame",
    )
    engine: Literal["auto", "netem", "delayline"] = Field("auto", description="what adds delay, jitter and loss")
    tcp: TcpOptions = Field(
        default_factory=TcpOptions, description="TCP settings of the nodes (unset: netbench's node defaults)"
    )
    topology: Topology = Field(
        None,  # type: ignore[assignment] - made by _default_network
        validate_default=True,
        description="the network as a graph (unset: the nodes behind one switch, shaped up/down)",
    )
    rank_order: Literal["topology", "interleaved"] | tuple[int, ...] = Field(
        "topology",
        description="which node each rank runs on: site by site, interleaved across sites, or a list of node indices",
    )

    @field_validator("topology", mode="before")
    @classmethod
    def _default_network(cls, value: Any, info: ValidationInfo) -> Any:
        """No topology given: the star of ``nodes`` behind one switch, each link shaped ``up`` and ``down``."""
        if value is None and {"nodes", "up", "down"} <= info.data.keys():
            return star(info.data["nodes"], info.data["up"], info.data["down"])
        return value

    @field_serializer("topology", mode="wrap")
    def _stored(self, topology: Topology, handler: SerializerFunctionWrapHandler) -> Any:
        """The star of ``nodes``, ``up`` and ``down`` is stored as no topology (validation makes it again)."""
        return None if self.on_star else handler(topology)

    def on_network(self, graph: Topology, rank_order: Any) -> ClusterSpec:
        """This cluster on ``graph`` (the node count the graph's), its ranks placed in ``rank_order``: a ValueError
        saying why this host cannot emulate the graph, a pydantic ValidationError for a placement that does not fit.
        """
        problem = emulation_problem(graph)
        if problem:
            raise ValueError(problem)
        return ClusterSpec.model_validate(
            {**self.model_dump(), "nodes": graph.node_count, "topology": graph, "rank_order": rank_order}
        )

    @property
    def on_star(self) -> bool:
        """Whether the network is the star that ``nodes``, ``up`` and ``down`` describe (the default)."""
        return self.topology == star_as_given(self.nodes, self.up, self.down)

    @model_validator(mode="after")
    def _topology_matches(self) -> ClusterSpec:
        if self.topology.node_count != self.nodes:
            raise ValueError(f"nodes {self.nodes} differs from the topology's {self.topology.node_count} nodes")
        place(self.topology, self.rank_order)  # a PlacementError is a ValueError: one line, before anything is built
        return self

    @property
    def placement(self) -> tuple[int, ...]:
        """Node index of every rank."""
        return place(self.topology, self.rank_order)

    @field_validator("nodes")
    @classmethod
    def _nodes_in_range(cls, v: int) -> int:
        if not MIN_NODES <= v <= MAX_EMULATED_NODES:
            raise ValueError(f"must be between {MIN_NODES} and {MAX_EMULATED_NODES}, got {v}")
        return v

    @property
    def impaired(self) -> bool:
        return self.topology.impaired

    @property
    def offload_enabled(self) -> bool:
        if self.offload != "auto":
            return self.offload == "on"
        return self.topology.max_rate_bps > 2.5e9

    @property
    def access(self) -> LinkSpec:
        """The access link of the first rank's node: what a run's summary, the shaper's burst credit and the model's
        flat view mean by "the link" (on the star, every node's: ``up`` forward, ``down`` reverse)."""
        return self.topology.access_link(self.placement[0])

    def one_way_delay_s(self) -> float:
        """Configured one-way delay between two nodes over :attr:`access` links (sender's up plus receiver's down)."""
        access = self.access
        return access.forward.delay_s + access.reverse.delay_s

    def expected_rtt_s(self) -> float:
        """Configured round-trip time between two nodes, excluding serialization and stack time."""
        return 2 * self.one_way_delay_s()
