"""Whether a replica fits an accelerator: its weights, gradients, optimizer and replicator state, collective buffers.

Every accelerator of a data-parallel plan holds a whole replica. Per accelerator:

* weights and gradients in fp32, 8 bytes a parameter;
* the state its replicator keeps (``state_bytes_per_param`` in its declaration: its inner optimizer's moments and
  its own buffers, counted from its implementation);
* the buffers of its collectives, from its payload: an all-reduce's buffer once, an all-gather's own contribution
  plus every rank's (world + 1 times: what makes a gathered payload grow with the cluster).

Activations are not counted (the batch, sequence and activation checkpointing set them), so the total is a floor:
a row over the accelerator's memory does not fit, one under it may still not once activations are added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from netbench.declarations.registry import spec
from netbench.model.schemes import Scheme
from netbench.shapes import ParamShape

__all__ = ["WEIGHTS_AND_GRADIENTS_BYTES", "MemoryFit", "memory_fit"]

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


def memory_fit(scheme: Scheme, shapes: Sequence[ParamShape], params: int, world: int, capacity: float) -> MemoryFit:
    """What ``scheme`` keeps on each of ``world`` accelerators of ``capacity`` bytes for a model of ``params``."""
    buffers = 0.0
    if world >= 2:
        for ex in scheme.exchanges(shapes, world):
            buffers += ex.bytes_per_step * ((world + 1) if ex.collective == "all_gather" else 1)
    return MemoryFit(
        weights_and_gradients=WEIGHTS_AND_GRADIENTS_BYTES * params,
        state=spec(scheme.name).state_bytes_with(scheme.config) * params,
        buffers=buffers,
        capacity=capacity,
    )
