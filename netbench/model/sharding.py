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
from typing import Any

from netbench.declarations.shards import shard_shapes
from netbench.model.collectives import Link, cost, pattern
from netbench.model.exchange import Exchange
from netbench.model.framing import Framing
from netbench.model.schemes import Scheme
from netbench.shapes import ParamShape, total_params

__all__ = [
    "LOOPBACK_BPS",
    "LOOPBACK_MTU",
    "node_shapes",
    "worker_shapes",
    "intra_bits_per_s",
    "intra_prediction",
    "PerWorkerScheme",
]

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
    return scheme if g <= 1 else PerWorkerScheme(scheme.name, scheme.config, scheme.overlap, g, tuple(shapes))


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
