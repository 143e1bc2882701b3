"""The parts of one training step: the scenario it runs in, the cost of one exchange on a link, and the step's record
(:mod:`netbench.model.network` composes them into the step).

The scenario counts workers (processes, one rank each); nodes are the machines they run on. Flat clusters: N workers,
one a node, on one switch, each node with an up and a down rate; the scheme's exchanges run among all N. Sharded
(FlexDeMo style, ``gpus_per_node`` G > 1): N workers (accelerators) in N/G nodes;
gradients are reduce-scattered and the result all-gathered inside a node on the fast intra-node
link (a ring all-reduce's traffic among G, every step), each accelerator compresses its 1/G shard,
and the scheme's exchanges for the whole model run among the N/G nodes on the slow link (the G
shards share the node's NIC, so the node carries the full model's payload).

Exchanges with a period (a replicator that syncs every H steps) are averaged per step; one that overlaps the next
steps' local work (Streaming DiLoCo's fragments) counts only the part of its time that work does not cover. Reported
wire bytes are the slow (inter-node) link's, per node, per step, both directions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, model_validator

from netbench.model.collectives import Algorithm, CollectiveCost, Link, cost, pattern
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing, LinkBytes
from netbench.model.gloo_tcp import STEADY_TIMERS, GlooTime, KernelTimers, gloo_time, skew_expected
from netbench.model.schemes import Scheme
from netbench.tcp import STOCK_LINUX, TcpSettings
from netbench.topology.graph import MIN_NODES

# gloo's pricing of one call is a pure function of its arguments, which repeat: a step's first and later calls, and
# replicators that send the same bytes at other periods, at every bandwidth a plan's searches probe
_gloo_call = lru_cache(maxsize=1 << 14)(gloo_time)  # a plan prices a few thousand distinct calls

__all__ = ["Scenario", "StepEstimate", "call_cost", "exchange_cost", "per_step", "ring_time", "dense_dtype"]

MAX_PLANNED_WORKERS = 100_000  # workers a plan may describe (an emulated cluster's: topology.graph.MAX_EMULATED_NODES)


class Scenario(BaseModel):
    """The cluster and workload a step runs in (all SI units)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(
        2,
        ge=MIN_NODES,
        le=MAX_PLANNED_WORKERS,
        description="workers N: processes, one a rank (accelerators when G > 1)",
    )
    up_bps: float = Field(100e6, gt=0, description="node uplink rate")
    down_bps: float = Field(100e6, gt=0, description="node downlink rate")
    delay_s: float = Field(0.0, ge=0, description="one-way latency between two nodes")
    compute_s: float = Field(0.0, ge=0, description="forward + backward per step")
    gpus_per_node: int = Field(1, ge=1, description="G: accelerators per node sharing a fast link")
    intra_bits_per_s: float | None = Field(None, gt=0, description="intra-node link rate (required when G > 1)")
    algorithm: Algorithm = "ring"
    framing: Framing = Framing()
    tcp: TcpSettings = Field(
        STOCK_LINUX, description="the nodes' TCP settings (ring: gloo over TCP's window and pacing)"
    )
    timers: KernelTimers = Field(
        STEADY_TIMERS,
        exclude=True,
        description="how the kernel's timers meet the calls (a run's dilation and age; plan: undilated and long)",
    )

    @model_validator(mode="after")
    def _hierarchy(self) -> Scenario:
        if self.gpus_per_node > 1:
            if self.intra_bits_per_s is None:
                raise ValueError("gpus_per_node > 1 needs intra_bits_per_s (the fast intra-node link rate)")
            if self.workers % self.gpus_per_node:
                raise ValueError(f"workers {self.workers} is not a multiple of gpus_per_node {self.gpus_per_node}")
        return self

    @property
    def machines(self) -> int:
        """Nodes (machines) that replicate over the slow link (N / G)."""
        return self.workers // self.gpus_per_node

    @property
    def bw_bps(self) -> float:
        """The bottleneck direction's rate."""
        return min(self.up_bps, self.down_bps)


@dataclass(frozen=True)
class StepEstimate:
    """Per-node, per-step averages of one scheme in one scenario."""

    scheme: str
    scenario: Scenario
    params: int
    exchanges: tuple[Exchange, ...]
    payload_bytes_per_step: float
    wire: CollectiveCost
    comm_time_s: float
    intra_time_s: float
    compression_time_s: float
    compute_time_s: float
    step_time_s: float
    overlap: bool = False

    @property
    def comm_fraction(self) -> float:
        """Share of the step spent communicating (0 when the step takes no time)."""
        return self.comm_time_s / self.step_time_s if self.step_time_s > 0 else 0.0

    @property
    def tx(self) -> LinkBytes:
        return self.wire.tx

    @property
    def rx(self) -> LinkBytes:
        return self.wire.rx


def dense_dtype(scheme: Scheme) -> str:
    """The dtype a dense gradient of this scheme travels in (its grad_dtype)."""
    return scheme.config.grad_dtype


def call_cost(
    exchange: Exchange,
    peers: int,
    link: Link,
    framing: Framing,
    algorithm: Algorithm,
    tcp: TcpSettings = STOCK_LINUX,
    idle_s: float | None = 0.0,
    paced_flight_bytes: float = 0.0,
    cpu_work_s: float = 0.0,
    timers: KernelTimers = STEADY_TIMERS,
) -> CollectiveCost:
    """Cost of one of the exchange's ``calls`` collective calls, which share its bytes evenly.

    Wire bytes come from the message pattern (:mod:`~netbench.model.collectives`). Time: for
    ``ring`` (what gloo runs) from gloo's pipeline over TCP (:mod:`~netbench.model.gloo_tcp`:
    segments, two in flight, the receiver's ready notification, window and pacing), at the
    payload rate the framing leaves on the bottleneck direction; other algorithms are alpha-beta.
    ``idle_s``: how long the connections rested before this call (None: long enough for any restart);
    ``paced_flight_bytes``: the largest burst of the step's calls (bbr paces every call at its rate);
    ``cpu_work_s``: each rank's encode + decode per step (whether the ranks of a ring of two drift a delay apart);
    ``timers``: how the kernel's timers meet the call (:class:`~netbench.model.gloo_tcp.KernelTimers`).
    """
    if not exchange.moves_bytes:
        return CollectiveCost()
    nbytes = exchange.bytes_per_step / exchange.calls
    p = pattern(exchange.ring_kind, algorithm, nbytes, peers)
    base = cost(p, link, framing)
    if algorithm != "ring" or p is None or base.transfer_s <= 0:
        return base
    t = ring_time(
        exchange,
        peers,
        p.critical_bytes / base.transfer_s,
        link,
        framing,
        tcp,
        idle_s,
        paced_flight_bytes,
        cpu_work_s,
        timers=timers,
    )
    return replace(base, time_s=t.time_s, latency_s=t.latency_s, transfer_s=t.transfer_s)


def ring_time(
    exchange: Exchange,
    peers: int,
    payload_Bps: float,
    link: Link,
    framing: Framing,
    tcp: TcpSettings,
    idle_s: float | None,
    paced_flight_bytes: float,
    cpu_work_s: float,
    fresh: bool = False,
    flows: int = 1,
    timers: KernelTimers = STEADY_TIMERS,
) -> GlooTime:
    """One call of gloo's ring over ``link`` at ``payload_Bps`` (its bottleneck's payload rate): :func:`gloo_time`
    (``fresh``: on connections that never carried data; ``flows``: how many of the call's flows share its busiest
    link direction; ``timers``: how the kernel's timers meet it)."""
    delay = link.delay_s
    skewed = skew_expected(
        exchange.collective, peers, exchange.calls, cpu_work_s, delay, free_running=exchange.runs_free
    )
    return _gloo_call(
        exchange.ring_kind,
        exchange.bytes_per_step / exchange.calls,
        peers,
        payload_Bps,
        delay,
        link.alpha_s - delay,
        framing.mss,
        tcp,
        idle_s,
        paced_flight_bytes,
        skewed,
        fresh,
        flows,
        timers,
    )


def exchange_cost(
    exchange: Exchange,
    peers: int,
    link: Link,
    framing: Framing,
    algorithm: Algorithm,
    tcp: TcpSettings = STOCK_LINUX,
    idle_s: float | None = 0.0,
    paced_flight_bytes: float = 0.0,
    cpu_work_s: float = 0.0,
    local_s: float = 0.0,
    timers: KernelTimers = STEADY_TIMERS,
) -> CollectiveCost:
    """Average per-step cost of one exchange: ``calls`` calls sharing its bytes, once per ``period``.

    The first call follows ``idle_s`` of rest (a restart of the congestion window where the TCP
    settings make one); the others follow it directly. ``local_s``: a step's local work, which an
    overlapping exchange hides behind (:func:`per_step`); ``timers``: how the kernel's timers meet the calls.
    """
    return per_step(
        exchange,
        lambda idle: call_cost(
            exchange, peers, link, framing, algorithm, tcp, idle, paced_flight_bytes, cpu_work_s, timers
        ),
        idle_s,
        local_s,
    )


def per_step(
    exchange: Exchange, call: Callable[[float | None], CollectiveCost], idle_s: float | None, local_s: float = 0.0
) -> CollectiveCost:
    """An exchange's calls averaged per step: ``call(idle)`` costs one call after ``idle`` seconds of rest.

    The first call follows the step's rest, the others follow it directly; the sum is spread over the period.
    An exchange that overlaps ``overlap_steps`` steps of local work (``local_s`` each: compute and codec) keeps
    its wire bytes but leaves only what those steps do not cover on the step (:meth:`Exchange.exposed_s`).
    """
    first = call(idle_s)
    whole = first.scaled(exchange.calls) if exchange.calls <= 1 else first + call(0.0).scaled(exchange.calls - 1)
    if exchange.overlap_steps:
        whole = replace(whole, time_s=exchange.exposed_s(whole.time_s, local_s))
    return whole.scaled(1 / exchange.period)
