"""The model's view of a run with G workers per node: whose shapes each link carries, and the loopback's bytes.

No second model: the step comes from :class:`netbench.model.network.GraphModel` with
``gpus_per_node`` (its sharding terms), and the intra-node bytes from the same ring pattern
it charges the intra-node link, priced with :mod:`netbench.model.framing` at the loopback's MTU
(the emulated intra-node link is each node's ``lo``). What changes is only what the model is fed:

* every worker replicates the slices it owns (:func:`netbench.declarations.shards.shard_shapes`),
  so the node's inter-node payload is G workers' payloads on slice shapes, not the whole model's
  (they differ where a dimension is padded, or where a codec's chunks cut slices differently);
* encode and decode are one worker's, on its slices, with N x G processes sharing the host's cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import median_low
from typing import Any

from netbench.declarations.shards import shard_shapes, shard_units, slice_rows
from netbench.model.calibration import Calibration
from netbench.model.collectives import CollectiveCost, Link, Pattern, cost, pattern
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing
from netbench.model.rings import RingSet
from netbench.model.schemes import Scheme
from netbench.model.steptime import Scenario
from netbench.shapes import ParamShape, total_params

__all__ = [
    "LOOPBACK_BPS",
    "LOOPBACK_MTU",
    "node_shapes",
    "worker_shapes",
    "intra_bits_per_s",
    "intra_prediction",
    "PerWorkerScheme",
    "FSDP_ELEMENT_BYTES",
    "FSDP_GATHERS",
    "fsdp_layers",
    "fsdp_payload_bytes",
    "ring_reduce_scatter_cost",
    "fsdp_cost",
]

FSDP_ELEMENT_BYTES = 4  # fully_shard gathers and reduces the fp32 parameters and gradients as they are
FSDP_GATHERS = 2  # each layer, the root too, gathered before its forward and again before its backward

LOOPBACK_BPS = (
    25e9  # an unshaped intra-node link: about what one core pushes through a veth or lo (docs/concepts/emulation.md)
)
LOOPBACK_MTU = 65536


def gpus_per_node(config: Any) -> int:
    return int(getattr(config, "gpus_per_node", 1) or 1)


def worker_shapes(shapes: Sequence[ParamShape], g: int) -> list[ParamShape]:
    """What one worker's replicator sees: its slices (G = 1: the whole model)."""
    return list(shapes) if g <= 1 else shard_shapes(shapes, g)


def node_shapes(shapes: Sequence[ParamShape], g: int) -> list[ParamShape]:
    """What a node's workers replicate together over its NIC: every worker's slices."""
    if g <= 1:
        return list(shapes)
    one = shard_shapes(shapes, g)
    return [ParamShape(f"{s.name}@{local}", s.shape) for local in range(g) for s in one]


@dataclass(frozen=True)
class PerWorkerScheme(Scheme):
    """A node's inter-node traffic as its G workers make it: each worker's own exchanges on its slices, G times.

    Each worker calls its collectives on its own connections, so a node makes G times the calls of
    one worker, each of one worker's size (a small payload split G ways pays G calls' overheads).
    """

    g: int = 1
    shapes: tuple[ParamShape, ...] = ()

    def exchanges(self, shapes: Sequence[ParamShape], world_size: int) -> tuple[Exchange, ...]:
        one = super().exchanges(worker_shapes(self.shapes, self.g), world_size)
        return tuple(replace(ex, bytes_per_step=ex.bytes_per_step * self.g, calls=ex.calls * self.g) for ex in one)


def per_worker(scheme: Scheme, shapes: Sequence[ParamShape], g: int) -> Scheme:
    """``scheme`` as a node of G workers runs it (itself when G = 1)."""
    return (
        scheme
        if g <= 1
        else PerWorkerScheme(scheme.name, scheme.config, scheme.overlap, scheme.phase, g=g, shapes=tuple(shapes))
    )


def intra_bits_per_s(config: Any) -> float:
    """One worker's share of the intra-node link: ``--intra-bw`` / G, else what an unshaped loopback carries.

    ``--intra-bw`` shapes the node's ``lo`` with one tbf, so it is one queue that all G workers'
    reduce-scatter and all-gather traffic passes at once: each worker's ring hop gets 1/G of it.
    The model's sharding terms price one worker's ring on a link of its own, hence the share.
    """
    shaped = getattr(config, "intra_bw_bps", None)
    return shaped / gpus_per_node(config) if shaped else LOOPBACK_BPS


def intra_prediction(
    shapes: Sequence[ParamShape], g: int, framing: Framing, overhead_s: float, rate_bps: float
) -> dict[str, float]:
    """Intra-node bytes per node per step on the loopback, and the intra-node time per worker.

    Reduce-scatter then all-gather of the padded fp32 model among G: a ring all-reduce's messages
    (:func:`~netbench.model.collectives.pattern`); each worker's share of them goes through ``lo``,
    so the node's loopback carries G times one worker's.
    """
    dense = total_params(node_shapes(shapes, g)) * 4
    lo = framing.model_copy(update={"mtu": LOOPBACK_MTU})
    one = cost(pattern("all_reduce", "ring", dense, g), Link(rate_bps, rate_bps, overhead_s), lo)
    return {"intra_tx_bytes_per_step": g * one.tx.total, "intra_comm_time_s": one.time_s}


def fsdp_layers(shapes: Sequence[ParamShape], n: int) -> list[float]:
    """Bytes of each layer fully_shard gathers over ``n`` ranks: its parameters, every first dimension padded to a
    multiple of ``n``."""
    return [
        float(sum(slice_rows(s.shape, n) * n * (s.numel // max(1, s.shape[0] if s.shape else 1)) for s in layer))
        * FSDP_ELEMENT_BYTES
        for layer in shard_units(shapes).values()
    ]


def fsdp_payload_bytes(shapes: Sequence[ParamShape], n: int) -> float:
    """Bytes one rank hands to the sharding collectives per step: its share of each gather, the whole of each
    reduce-scatter (as an all-reduce's buffer is counted)."""
    return sum(b * FSDP_GATHERS / n + b for b in fsdp_layers(shapes, n))


def ring_reduce_scatter_cost(rings: RingSet, nbytes: float, overhead_s: float, framing: Framing) -> CollectiveCost:
    """One reduce-scatter of an ``nbytes`` buffer on ``rings`` as netbench runs it: N - 1 rounds of point-to-point
    sends of one shard to the next rank. Each round posts its receive as it starts, so a round costs the receiver's
    ready notification back (the hop's reverse delay), the shard forward (its forward delay and transfer) and a
    message's overhead; every rank sends (N - 1) / N of the buffer."""
    n = rings.peers
    share = nbytes / n
    p = Pattern(
        hops=n - 1, messages_out=n - 1, message_bytes=share, payload_out=(n - 1) * share, critical_bytes=(n - 1) * share
    )
    hops = {price for ring in rings.prices() for price in ring}
    typical = median_low([h.path_bps for h in hops if h.path_bps is not None] or [0])
    flow = framing.flow(p.messages_out, p.message_bytes, path_bps=typical or None)
    wire = flow.forward + flow.reverse

    def on(hop) -> CollectiveCost:
        latency = p.hops * (overhead_s + hop.forward_s + hop.reverse_s)
        transfer = hop.transfer_s(p, framing)
        return CollectiveCost(latency + transfer, latency, transfer, wire, wire, p.hops)

    return max((on(hop) for hop in hops), key=lambda c: c.time_s)


def fsdp_cost(
    rings: RingSet, shapes: Sequence[ParamShape], scenario: Scenario, calibration: Calibration
) -> CollectiveCost:
    """FSDP's collectives of one step on ``rings`` (every sharding group at once), one layer after another with
    nothing prefetched (gloo on CPU: each gather is waited for before its layer computes): per layer, gloo's ring
    all-gather of its shards before its forward and again before its backward, and
    :func:`ring_reduce_scatter_cost` of its gradients. The per-message overhead is the calibrated all-gather's, a
    hop of the same send and receive."""
    if rings.peers < 2:
        return CollectiveCost()
    prices = rings.prices()
    overhead = calibration.overhead("all_gather")
    total = CollectiveCost()
    for nbytes in fsdp_layers(shapes, rings.peers):
        shard = Exchange("all_gather", round(nbytes / rings.peers), label="fsdp")
        gather = rings.call_cost(
            shard, prices, overhead, scenario.framing, scenario.tcp, 0.0, 0.0, 0.0, timers=scenario.timers
        )
        total = (
            total + gather.scaled(FSDP_GATHERS) + ring_reduce_scatter_cost(rings, nbytes, overhead, scenario.framing)
        )
    return total
