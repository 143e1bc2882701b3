"""The bucket pipeline every pipelined replicator runs: encode, start, then wait and decode one behind.

Schedule for n buckets (E = encode, S = start the async collective, W = wait, D = decode)::

    E0 S0 | E1 S1 W0 D0 | E2 S2 W1 D1 | ... | W(n-1) D(n-1)

so bucket i travels while bucket i+1 is encoded and bucket i-1 decoded; at most two
collectives are in flight. gloo runs collectives on its own threads in the order they were
started, identical on every rank, so the result equals the one-bucket step bit for bit
wherever the collective itself does not reorder sums (all-gather; all-reduce on 2 ranks).
"""

from __future__ import annotations

from collections.abc import Callable

from netbench.replicators.base import StepTimer
from netbench.replicators.comm import Pending

__all__ = ["run_pipeline"]


def run_pipeline(buckets: int, encode: Callable[[int], None], start: Callable[[int], Pending],
                 decode: Callable[[int], None], timer: StepTimer) -> None:
    """Run ``encode(i)``, ``start(i)`` and, one bucket behind, ``wait`` + ``decode(i)`` for every bucket."""
    pending: list[Pending] = []
    for i in range(buckets + 1):
        if i < buckets:
            encode(i)
            timer.compress()
            pending.append(start(i))
            timer.skip()
        if i > 0:
            pending[i - 1].wait()
            timer.skip()
            decode(i - 1)
            timer.decode()
