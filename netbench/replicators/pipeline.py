"""The bucket pipeline every pipelined replicator runs: encode, start, then wait and decode behind.

Schedule for n buckets (E = encode, S = start the async collective, W = wait, D = decode) with
``behind`` = 1 (the default)::

    E0 S0 | E1 S1 W0 D0 | E2 S2 W1 D1 | ... | W(n-1) D(n-1)

so bucket i travels while bucket i+1 is encoded and bucket i-1 decoded. ``behind`` = None
encodes and starts every bucket first, then waits and decodes them in order::

    E0 S0 E1 S1 ... E(n-1) S(n-1) | W0 D0 W1 D1 ... W(n-1) D(n-1)

which gives bucket i the encodes after it and the decodes before it to travel in: the better
form wherever the buckets' collectives travel at once (lanes, see replicators/comm.py), since a
decode unlocks nothing while an encode starts a collective, so encoding first keeps the most
bytes and latency in flight. ``behind`` = 0 (``READY``) adapts for a pipeline whose collectives
queue (one lane, sharded nodes' replication subgroup): after each start it decodes the buckets
whose collective has already completed (a non-blocking check) and blocks only once every bucket
is started. gloo runs each group's collectives in the order they were started, identical on
every rank, so the result equals the one-bucket step bit for bit wherever the collective itself
does not reorder sums (all-gather; all-reduce on 2 ranks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from netbench.declarations.pipeline_policy import READY

if TYPE_CHECKING:
    from netbench.replicators.base import StepTimer
    from netbench.replicators.comm import Pending

__all__ = ["run_pipeline"]


def run_pipeline(
    buckets: int,
    encode: Callable[[int], None],
    start: Callable[[int], Pending],
    decode: Callable[[int], None],
    timer: StepTimer,
    behind: int | None = 1,
) -> None:
    """Run ``encode(i)`` and ``start(i)`` for every bucket, and ``wait`` + ``decode(i)`` ``behind``
    buckets later (``None``: after every bucket is started)."""
    ready = behind == READY
    lag = buckets if behind is None or ready else max(1, behind)
    pending: list[Pending] = []
    decoded = 0

    def finish_next() -> None:
        nonlocal decoded
        pending[decoded].wait()
        timer.skip()
        decode(decoded)
        timer.decode()
        decoded += 1

    for i in range(buckets):
        encode(i)
        timer.compress()
        pending.append(start(i))
        timer.skip()
        while decoded <= i - lag or (ready and decoded < i and pending[decoded].done()):
            finish_next()
    while decoded < buckets:
        finish_next()
