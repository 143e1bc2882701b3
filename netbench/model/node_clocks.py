"""A pairwise exchange (gossip) replayed with a clock per node.

No collective of every node lines a gossip run up: each node runs its own local work, and at a sync it waits for
its partner only. A node late from its last exchange (or slower at its local work) holds its partner, whose next
partner it then holds; a pair that enters its sync before the other has a shared link to itself until the other
enters, and the pair left when the other is done has it alone again. :func:`replay_clocks` follows each node's clock
through the measured steps: a node advances by its own local work; at a sync each pair starts when both partners
are there (the later of the two), spends its fixed time (round trips, per-message overhead), then moves its bytes
over its links, each link direction's rate divided among the pairs with data on it at that moment (a fluid share);
the partners leave when their pair is done.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Pair", "PairPrice", "replay_clocks"]

Pair = tuple[int, int]


@dataclass(frozen=True)
class PairPrice:
    """One pair's exchange at a sync: ``fixed_s`` that no other pair's bytes lengthen, ``wire_s`` its bytes take with
    every link direction of ``links`` (those its data crosses) to itself."""

    fixed_s: float
    wire_s: float
    links: frozenset[Hashable]


def replay_clocks(
    local_s: Mapping[int, Sequence[float]],
    syncs: Mapping[int, Sequence[Pair]],
    price: Callable[[int, Pair], PairPrice],
    start_s: Mapping[int, float] | None = None,
) -> dict[int, float]:
    """Each rank's mean step over the replayed steps: ``local_s`` is each rank's local work per step (all as long),
    ``syncs`` the pairs that exchange at the end of a step (by its index into ``local_s``), ``price(index, pair)``
    that pair's exchange at that sync. ``start_s``: when each rank starts the first step (a lag carried in from the
    steps before; default: together)."""
    begin = {rank: (start_s or {}).get(rank, 0.0) for rank in local_s}
    clock = dict(begin)
    count = len(next(iter(local_s.values()), ()))
    for i in range(count):
        for rank, work in local_s.items():
            clock[rank] += work[i]
        pairs = [p for p in syncs.get(i, ()) if p[0] != p[1] and p[0] in clock and p[1] in clock]
        if pairs:
            done = _exchange({p: max(clock[p[0]], clock[p[1]]) for p in pairs}, {p: price(i, p) for p in pairs})
            for (a, b), t in done.items():
                clock[a] = clock[b] = t
    return {rank: (t - begin[rank]) / count for rank, t in clock.items()} if count else dict.fromkeys(clock, 0.0)


def _exchange(enter: Mapping[Pair, float], prices: Mapping[Pair, PairPrice]) -> dict[Pair, float]:
    """When each pair is done: its wire starts ``fixed_s`` after it enters, and while k pairs have data on one link
    direction each gets 1/k of it; a pair moves at the share of its most shared direction."""
    start = {p: enter[p] + prices[p].fixed_s for p in enter}
    left = {p: prices[p].wire_s for p in enter}  # seconds of wire at the whole link's rate
    done: dict[Pair, float] = {}
    waiting = sorted(start, key=start.__getitem__)
    active: list[Pair] = []
    t = min(start.values())
    while waiting or active:
        while waiting and start[waiting[0]] <= t:
            p = waiting.pop(0)
            if left[p] <= 0.0:
                done[p] = start[p]
            else:
                active.append(p)
        if not active:
            if waiting:
                t = start[waiting[0]]
            continue
        sharing: dict[Hashable, int] = {}
        for p in active:
            for link in prices[p].links:
                sharing[link] = sharing.get(link, 0) + 1
        rate = {p: 1.0 / max((sharing[link] for link in prices[p].links), default=1) for p in active}
        finish = min(left[p] / rate[p] for p in active)
        step = min(finish, start[waiting[0]] - t) if waiting else finish
        t += step
        for p in list(active):
            left[p] -= step * rate[p]
            if left[p] <= 1e-12:
                active.remove(p)
                done[p] = t
    return done
