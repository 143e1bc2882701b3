"""Striding replication: every n-th element, with an offset that rotates so nothing is starved."""

from __future__ import annotations

from collections.abc import Sequence

from netbench.declarations import striding_spec
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.striding_spec import stride_of
from netbench.replicators.subset import SubsetReplicator
from netbench.shapes import ParamShape

__all__ = ["StridingReplicator", "stride_of"]


class StridingReplicator(SubsetReplicator):
    """Sends positions ``offset, offset + n, offset + 2n, ...`` of the flat parameter vector.

    ``offset = step mod n``, so over any n consecutive steps every element is sent exactly once.
    (The published StridingReplicator advances its offset by ``stride * count`` rows, which is
    0 mod the row count whenever the stride times the count equals it: it then sends the same
    rows forever.) The flat vector spans all tensors, so every tensor is strided at rate 1/n;
    its length need not be a multiple of n, so a step sends ``ceil(P / n)`` slots and the last
    one is a zero pad on the steps whose offset leaves one element fewer. Selection is a strided
    view: no index tensor is built or sent.
    """

    name = "striding"

    @classmethod
    def slots(cls, shapes: Sequence[ParamShape], config: ReplicatorConfig) -> int:
        return striding_spec.slots(shapes, config)

    def selection(self, step: int) -> slice:
        n = stride_of(self.config)
        return slice(step % n, self.layout.numel, n)
