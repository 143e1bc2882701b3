"""The bucket pipeline every pipelined replicator runs: encode, start, then wait and decode behind.

Schedule for n buckets (E = encode, S = start the async collective, W = wait, D = decode) with
``behind`` = 1 (the default)::

    E0 S0 | E1 S1 W0 D0 | E2 S2 W1 D1 | ... | W(n-1) D(n-1)

so bucket i travels while bucket i+1 is encoded and bucket i-1 decoded. ``behind`` = None
encodes and starts every bucket first, then waits and decodes them in order::

    E0 S0 E1 S1 ... E(n-1) S(n-1) | W0 D0 W1 D1 ... W(n-1) D(n-1)

which gives bucket i the encodes after it and the decodes before it to travel in (1 - 1/n of
the codec time on even buckets): the better form where each collective has a large fixed
latency (a delayed link) and the codec dominates. ``behind`` = 0 (``READY``, the default of every
pipelined replicator) adapts between the two: after each start it decodes the buckets whose
collective has already completed (a non-blocking check) and blocks only once every bucket is
started, so it never idles waiting while there is a bucket left to encode, and decodes early
where the link is fast. gloo runs collectives on its own threads in
the order they were started, identical on every rank, so the result equals the one-bucket step
bit for bit wherever the collective itself does not reorder sums (all-gather; all-reduce on 2 ranks).
"""

from __future__ import annotations

from collections.abc import Callable

from netbench.replicators.base import StepTimer
from netbench.replicators.comm import Pending

__all__ = ["run_pipeline", "behind_for", "READY"]

READY = 0  # ``behind`` = 0: decode what has arrived, block only after the last start

# Neither fixed schedule wins everywhere (reports/pipeline/race_tuning.txt, bench.txt): for dct at
# 100mbit + 20 ms on 3 buckets, encoding every bucket first measured 1.10x the overlap limit where
# decoding one behind measured 1.375x (each wait a full delayed collective); at 100mbit, 0 ms on
# 8 buckets, encode-first measured 1.375x the one-bucket step where one behind measured 0.76x.
# READY decodes early where collectives complete early and keeps encoding where they do not.


def behind_for(replicator: str) -> int | None:
    """The ``behind`` setting ``replicator`` runs its pipeline with (the model reads it too)."""
    return READY


def run_pipeline(buckets: int, encode: Callable[[int], None], start: Callable[[int], Pending],
                 decode: Callable[[int], None], timer: StepTimer, behind: int | None = 1) -> None:
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
