"""Whether a replica fits an accelerator: its weights, gradients, optimizer and replicator state, collective buffers.

Every accelerator of a data-parallel plan holds a whole replica. Per accelerator:

* weights and gradients in fp32, 8 bytes a parameter;
* the state its replicator keeps (``state_bytes_per_param`` in its declaration: its inner optimizer's moments and
  its own buffers, counted from its implementation);
* the buffers of its collectives, from its payload: an all-reduce's buffer once, an all-gather's own contribution
  plus every rank's (world + 1 times: what makes a gathered payload grow with the cluster).

With a parallel layout (:class:`MemorySplit`) a GPU holds 1/(tp x pp) of the model, and sharding divides by the shard
group's size the optimizer and replicator state (ZeRO-1), the gradients too (ZeRO-2) and the weights too (ZeRO-3,
FSDP, HSDP); the replicator's buffers are those of its slice among the replicas.

Activations are not counted (the batch, sequence and activation checkpointing set them), so the total is a floor:
a row over the accelerator's memory does not fit, one under it may still not once activations are added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from netbench.declarations.registry import spec
from netbench.model.schemes import Scheme
from netbench.shapes import ParamShape

__all__ = ["WEIGHTS_AND_GRADIENTS_BYTES", "MemoryFit", "MemorySplit", "memory_fit"]

WEIGHTS_AND_GRADIENTS_BYTES = 8  # fp32 weights and their fp32 gradients, per parameter


@dataclass(frozen=True)
class MemoryFit:
    """One accelerator's share of a plan row, in bytes, against its memory."""

    weights_and_gradients: float
    state: float
    buffers: float
    capacity: float

    @property
    def total(self) -> float:
        return self.weights_and_gradients + self.state + self.buffers

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def as_dict(self) -> dict:
        return {
            "bytes": self.total,
            "weights_and_gradients_bytes": self.weights_and_gradients,
            "state_bytes": self.state,
            "buffer_bytes": self.buffers,
            "accelerator_bytes": self.capacity,
            "fits": self.fits,
            "activations": "not counted",
        }


@dataclass(frozen=True)
class MemorySplit:
    """How a parallel layout divides one GPU's share: ``slices`` GPUs hold one copy of the model (tp x pp), and the
    shard group's size divides the weights, the gradients and the state where the sharding says so."""

    slices: int = 1
    weights: int = 1
    gradients: int = 1
    state: int = 1


def memory_fit(
    scheme: Scheme,
    shapes: Sequence[ParamShape],
    params: int,
    world: int,
    capacity: float,
    split: MemorySplit = MemorySplit(),
) -> MemoryFit:
    """What ``scheme`` keeps on each accelerator of ``capacity`` bytes for a model of ``params``, its replicator
    among ``world`` replicas; ``split``: what a parallel layout divides."""
    own = params / split.slices
    buffers = 0.0
    if world >= 2:
        for ex in scheme.exchanges(shapes, world):
            buffers += ex.bytes_per_step * ((world + 1) if ex.collective == "all_gather" else 1)
    half = WEIGHTS_AND_GRADIENTS_BYTES / 2
    return MemoryFit(
        weights_and_gradients=half * own / split.weights + half * own / split.gradients,
        state=spec(scheme.name).state_bytes_with(scheme.config) * own / split.state,
        buffers=buffers / (split.slices * split.state),
        capacity=capacity,
    )
